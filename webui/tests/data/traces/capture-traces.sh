#!/usr/bin/env bash
# Re-creates the real trace captures used by tests/test_trace_import.py (run as root on Debian 12:
# fio 3.33, blkparse from blktrace 2.0.0, python3). See README.md beside this script.
# The hand-written files (fio-iolog-v2-handwritten.log, msr-handmade.csv) are not made here;
# the v2 iolog is only checked, by replaying it with fio.
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
tracing=/sys/kernel/tracing
[ -e "$tracing/current_tracer" ] || tracing=/sys/kernel/debug/tracing
old_tracer=$(cat "$tracing/current_tracer")
old_bin=$(cat "$tracing/options/bin")
dev=""
cleanup() {
    if [ -n "$dev" ]; then
        echo 0 > "/sys/block/${dev#/dev/}/trace/enable" || true
        losetup -d "$dev"
    fi
    echo "$old_bin" > "$tracing/options/bin"
    echo "$old_tracer" > "$tracing/current_tracer"
    rm -rf "$work"
}
trap cleanup EXIT
truncate -s 256M "$work/disk.img"
dev=$(losetup -f --show "$work/disk.img")
common=(--filename="$dev" --direct=1 --ioengine=libaio --output=/dev/null)

# fio iolog v3: fio 3.33 writes this version only. write_iolog appends, so start afresh.
rm -f "$out/fio-3.33-iolog-v3.log"
fio --name=iolog "${common[@]}" --rw=randrw --rwmixread=60 --bssplit=4k/50:16k/30:64k/20 \
    --iodepth=4 --size=64M --number_ios=120 --write_iolog="$out/fio-3.33-iolog-v3.log"

# The hand-written v2 iolog must be one that fio replays: count what fio did.
fio --name=replay --read_iolog="$out/fio-iolog-v2-handwritten.log" --replay_redirect="$dev" \
    --ioengine=psync --direct=1 --output-format=json --output="$work/replay.json"
python3 - "$out/fio-iolog-v2-handwritten.log" "$work/replay.json" <<'PY'
import json, sys
actions = [line.split()[1] for line in open(sys.argv[1]).readlines()[1:]]
job = json.load(open(sys.argv[2]))["jobs"][0]
for op in ("read", "write"):
    assert job[op]["total_ios"] == actions.count(op), (op, job[op]["total_ios"], actions.count(op))
print("fio replayed the v2 iolog:", {op: job[op]["total_ios"] for op in ("read", "write", "trim")})
PY

# blkparse: blktrace's own debugfs interface is refused here ("Lockdown: blktrace: debugfs
# access is restricted"), so the kernel's blk tracer records the same events through
# tracefs. With the `bin` option, trace_pipe gives each event as ftrace's 16-byte header
# (pid, cpu, time) followed by the kernel's struct blk_io_trace and its payload, which is
# what blktrace would have written; the header is dropped and per-CPU sequence numbers
# are filled in, then the real blkparse formats the stream.
echo blk > "$tracing/current_tracer"
echo 1 > "$tracing/options/bin"
echo 1 > "/sys/block/${dev#/dev/}/trace/enable"
echo > "$tracing/trace"
cat "$tracing/trace_pipe" > "$work/ftrace.bin" &
reader=$!
sleep 1
fio --name=seq-qd1 "${common[@]}" --rw=read --bs=64k --iodepth=1 --size=2M
fio --name=rand-qd8 "${common[@]}" --rw=randwrite --bs=4k --iodepth=8 --number_ios=48 --fsync=16 --size=64M
fio --name=mixed-qd4 "${common[@]}" --rw=randrw --bssplit=4k/50:16k/50 --iodepth=4 --number_ios=32 --size=64M
fio --name=discard "${common[@]}" --rw=trim --bs=1M --iodepth=1 --size=4M --offset=128M
sleep 1
kill "$reader"
wait "$reader" || true
echo 0 > "/sys/block/${dev#/dev/}/trace/enable"
python3 - "$work/ftrace.bin" "$work/blk.bin" <<'PY'
import struct, sys
data, out, pos, seq = open(sys.argv[1], "rb").read(), bytearray(), 0, {}
while pos + 16 + 48 <= len(data):
    pos += 16  # ftrace's pid, cpu, timestamp
    event = bytearray(data[pos:pos + 48])
    magic, = struct.unpack_from("<I", event, 0)
    assert magic & 0xffffff00 == 0x65617400, hex(magic)  # BLK_IO_TRACE_MAGIC
    cpu, = struct.unpack_from("<I", event, 40)
    pdu_len, = struct.unpack_from("<H", event, 46)
    seq[cpu] = seq.get(cpu, 0) + 1
    struct.pack_into("<I", event, 4, seq[cpu])
    out += event + data[pos + 48:pos + 48 + pdu_len]
    pos += 48 + pdu_len
assert pos == len(data), (pos, len(data))
open(sys.argv[2], "wb").write(out)
PY
blkparse -i - < "$work/blk.bin" > "$out/blkparse-loop.txt"
ls -l "$out"
