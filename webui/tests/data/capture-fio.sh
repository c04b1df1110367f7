#!/usr/bin/env bash
# Re-creates the fio captures used by the parser tests (run as root on Debian 12, fio 3.33).
# The captures are the literal output of fio against a loop device; nothing here is edited by hand.
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'losetup -d "$dev" 2>/dev/null; rm -rf "$work"' EXIT
truncate -s 256M "$work/disk.img"
dev=$(losetup -f --show "$work/disk.img")
cd "$work"

# Plain JSON of a mixed job, with per-second logs, as the runner asks for them.
cat > mixed.fio <<JOB
[global]
ioengine=libaio
direct=1
filename=$dev
time_based=1
runtime=3
log_avg_msec=1000
write_iops_log=mixed
write_bw_log=mixed
write_lat_log=mixed
write_hist_log=mixed
log_hist_msec=1000
percentile_list=50:90:99:99.9:99.99
[mixed]
rw=randrw
rwmixread=70
bs=4k
iodepth=4
size=128M
JOB
fio --output-format=json --output="$out/fio-3.33-randrw.json" mixed.fio
cp mixed_iops.1.log "$out/fio-3.33-randrw_iops.1.log"
cp mixed_bw.1.log "$out/fio-3.33-randrw_bw.1.log"
cp mixed_clat_hist.1.log "$out/fio-3.33-randrw_clat_hist.1.log"

# The same job with the suites' latency and offset options: percentiles of total latency only, a fixed
# random seed and no random map.
sed -e 's/^percentile_list=.*/&\nlat_percentiles=1\nclat_percentiles=0\nnorandommap=1\nrandseed=2011/' \
    -e 's/=mixed$/=mixed-lat/' mixed.fio > mixed-lat.fio
fio --output-format=json --output="$out/fio-3.33-randrw-lat.json" mixed-lat.fio

# A synchronous engine with iodepth > 1 makes fio print a note on stdout before the JSON.
fio --output-format=json --name=note --filename="$dev" --ioengine=psync --iodepth=4 \
    --rw=read --bs=64k --size=32M --direct=1 > "$out/fio-3.33-note-before-json.txt"

# --status-interval appends one full JSON document per interval, then the final one.
fio --output-format=json --status-interval=1 --name=status --filename="$dev" --ioengine=libaio \
    --iodepth=8 --rw=randwrite --bs=4k --size=128M --time_based=1 --runtime=3 --direct=1 \
    --output="$out/fio-3.33-status-interval.json"
