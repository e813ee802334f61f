// Hover read-out for the inline SVG charts. Optional: the report reads fully without it.
// Values come from the drawn paths themselves (pixel -> value), so no data is duplicated.
(function () {
  "use strict";
  function points(path) {
    var nums = (path.getAttribute("d") || "").match(/-?\d+(?:\.\d+)?/g) || [];
    var pts = [];
    for (var i = 0; i + 1 < nums.length; i += 2) { pts.push([+nums[i], +nums[i + 1]]); }
    pts.sort(function (a, b) { return a[0] - b[0]; });
    return pts;
  }
  function nearest(pts, x) {
    var lo = 0, hi = pts.length - 1;
    if (hi < 0) { return -1; }
    while (hi - lo > 1) { var mid = (lo + hi) >> 1; if (pts[mid][0] < x) { lo = mid; } else { hi = mid; } }
    return Math.abs(pts[lo][0] - x) <= Math.abs(pts[hi][0] - x) ? lo : hi;
  }
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function utc(d) {
    return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + " " +
      pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds()) + " UTC";
  }
  function when(sec, zone) {
    var d = new Date(sec * 1000), local = "";
    try {
      local = new Intl.DateTimeFormat("sv-SE", { timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit",
        hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false, timeZoneName: "short" }).format(d);
    } catch (e) { local = ""; }
    return local ? local + "  (" + utc(d) + ")" : utc(d);
  }
  function setup(svg) {
    var fig = svg.closest("figure");
    var out = fig ? fig.querySelector("output.readout") : null;
    var guide = svg.querySelector("line.guide");
    if (!out || !guide || !svg.getScreenCTM) { return; }
    var ds = svg.dataset;
    var left = +ds.left, right = +ds.right, top = +ds.top, bottom = +ds.bottom;
    var x0 = +ds.x0, x1 = +ds.x1, ymax = +ds.ymax, factor = +ds.factor, unit = ds.unit;
    var series = Array.prototype.map.call(svg.querySelectorAll("path.series"), function (p) {
      return { name: p.getAttribute("data-name") || "", pts: points(p) };
    });
    var half = Math.max(1.6, (right - left) / 600 + 0.2);
    svg.addEventListener("mousemove", function (ev) {
      var ctm = svg.getScreenCTM();
      if (!ctm) { return; }
      var pt = svg.createSVGPoint();
      pt.x = ev.clientX; pt.y = ev.clientY;
      var p = pt.matrixTransform(ctm.inverse());
      if (p.x < left || p.x > right || p.y < top - 14 || p.y > bottom) { guide.setAttribute("visibility", "hidden"); return; }
      guide.setAttribute("x1", p.x); guide.setAttribute("x2", p.x); guide.setAttribute("visibility", "visible");
      var x = x0 + (p.x - left) / (right - left) * (x1 - x0);
      var head = ds.xkind === "time" ? when(x, ds.zone) : (ds.xkind === "step" ? "step " : "sample ") + Math.round(x);
      var parts = [];
      series.forEach(function (s) {
        var i = nearest(s.pts, p.x);
        if (i < 0 || Math.abs(s.pts[i][0] - p.x) > 3 * half) { return; }
        var lo = Infinity, hi = -Infinity, ref = s.pts[i][0];
        for (var j = i; j >= 0 && ref - s.pts[j][0] <= half; j--) { lo = Math.min(lo, s.pts[j][1]); hi = Math.max(hi, s.pts[j][1]); }
        for (j = i; j < s.pts.length && s.pts[j][0] - ref <= half; j++) { lo = Math.min(lo, s.pts[j][1]); hi = Math.max(hi, s.pts[j][1]); }
        function val(py) { return ((bottom - py) / (bottom - top) * ymax / factor); }
        var a = val(hi), b = val(lo);
        var text = Math.abs(b - a) < 0.005 * (ymax / factor) ? b.toFixed(2) : a.toFixed(2) + "–" + b.toFixed(2);
        parts.push(s.name + ": " + text + " " + unit);
      });
      out.textContent = head + (parts.length ? "  |  " + parts.join("  |  ") : "");
    });
    svg.addEventListener("mouseleave", function () { guide.setAttribute("visibility", "hidden"); out.textContent = ""; });
  }
  Array.prototype.forEach.call(document.querySelectorAll("svg.chart"), setup);
})();
