"""Limits: they keep the report small on the worst day (a month of 1 Hz readings from 8 GPUs).

Series are drawn from a fixed number of min/max buckets, never the raw rows, and every list is capped,
with the rest summarized as counts.
"""
PLOT_BUCKETS = 250          # min/max buckets per series across a chart's width
PROCESS_BUCKETS = 120       # process charts are drawn smaller
MARKER_COLUMNS = 120        # events closer than 1/120 of the width merge into one marker
ZOOM_BUCKETS = 200
ZOOM_MIN_READINGS = 40      # close-ups only for series long enough to need them
SPARK_CELLS = 32            # characters in a Markdown sparkline
MAX_GPU_CHARTS = 16
MAX_PROCESS_CHARTS = 12
MAX_OTHER_CHARTS = 8
MAX_SERIES_PER_CHART = 8
MAX_MARKERS_PER_CHART = 24  # per GPU chart; process charts and close-ups get fewer
MAX_MARKERS_PROCESS = 10
MAX_MARKERS_ZOOM = 16
MAX_FINDINGS = 30
MAX_EVIDENCE = 6
MAX_EVENT_ROWS = 80
MAX_TABLE_ROWS = 20         # OOM kills, CUDA OOMs, Xid groups
MAX_SANITIZER_GROUPS = 30
MAX_FRAMES = 16
MAX_INPUT_ROWS = 100
MAX_PROBLEMS = 100
MAX_TEXT = 400              # characters of one quoted log line
MAX_DETAIL_ITEMS = 14
EMBED_FINDINGS = 20
EMBED_EVIDENCE = 2          # evidence lines per finding in the JSON embedded in the HTML
EMBED_INPUTS = 50
