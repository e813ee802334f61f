#!/bin/bash
# One device call: record one half, end leftovers by pid, a few environment checks, pack.
#   bash tools/corpus/call.sh tune|heldout [extra record.py args]
HALF=$1; shift
export PYTHONUNBUFFERED=1
D=/tmp/corpus
timeout -s TERM ${LIMIT:-540} python3 tools/corpus/record.py --half "$HALF" --out $D --tgz "$OUT/$HALF.tar.gz" --deadline ${DEADLINE:-520} "$@" > "$OUT/driver-$HALF.txt" 2>&1
echo "record.py rc=$?" >> "$OUT/driver-$HALF.txt"
for p in $(cat $D/_runs/$HALF-pids.txt 2>/dev/null); do kill -9 "$p" 2>/dev/null && echo "killed leftover $p" >> "$OUT/driver-$HALF.txt"; done
( set -x
  [ -n "$NOCHECK" ] || timeout 25 python3 -c "import lightning.pytorch as pl; from lightning.pytorch.loggers import CSVLogger; print('lightning', pl.__version__)"
  timeout 6 nvidia-smi dmon -s mu -o DT -c 2
  nvidia-smi --query-compute-apps=timestamp,pid,process_name,used_memory --format=csv
  ls /usr/share/zoneinfo | head -3; cat /sys/fs/cgroup/cgroup.controllers; nproc; free -g; date; uptime
) > "$OUT/checks-$HALF.txt" 2>&1
tar czf "$OUT/$HALF.tar.gz" -C /tmp corpus
ls -la "$OUT"
