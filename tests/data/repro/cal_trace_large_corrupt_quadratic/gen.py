"""Write e50.json, e100.json, e200.json: a Kineto trace whose first event is bad JSON (an unquoted key),
followed by 50/100/200 MB of valid CPU-op events."""

import json

cpu = {
    "ph": "X",
    "cat": "cpu_op",
    "name": "aten::linear",
    "pid": 1,
    "tid": 2,
    "ts": 1000000.0,
    "dur": 3.0,
    "args": {"Input Dims": [[8192, 4096], [4096, 4096]]},
}
line = ",\n" + json.dumps(cpu)
for mb in (50, 100, 200):
    with open(f"e{mb}.json", "w") as fh:
        fh.write('{"traceEvents": [\n{"ph": "X", "cat": "kernel", "name": "x", "ts": 1, dur: 2}')
        blob = line * 1000
        while fh.tell() < mb * 1e6:
            fh.write(blob)
        fh.write("\n]}\n")
