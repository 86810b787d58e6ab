#!/usr/bin/env python3
"""Instructions per encoded frame, by library, from callgrind dumps: for Scripts/bench-callgrind.

    callgrind-report.py OUT.md LABEL:CONTENT:ENCODED:CAPTURED:CALLGRIND_FILE [...]

Each argument is one measured run: a label (which binary), the content, the frames the sender
encoded and the pictures it captured while callgrind counted (CAPTURED may end in ~: an
estimate), and the callgrind dump of that window. The cost of each function is its own
(exclusive) instruction count, summed by the object it is in (libvpx, libyuv, the X libraries,
libc, screenshare's own code, the Swift runtime); the report divides by frames encoded: what
a frame delivered cost, the pictures captured and converted for it included. Runs of the same
content with another label are compared with the first label.

Reads the dump's text format (callgrind_format(5)): `ob=` names the object of the cost lines
that follow and `fn=` their function; a cost line right after `calls=` is the inclusive cost of
a call (counted in the callee), not the caller's own, and is skipped.

The release build links the Swift runtime statically (Scripts/lib/common.sh): in the screenshare
binary, a function counts as the Swift runtime when its name is one of the runtime's (swift_*,
swift::*), the standard library's ($ss, $sS + a standard type), FoundationEssentials' or
Dispatch's, unless it is a specialization for screenshare's types (Tg5, Tf...: compiled into
screenshare's own objects, as with a dynamically linked runtime).
"""
import re
import sys
from collections import defaultdict

GROUPS = [  # (name, pattern on the object's path), first match wins
    ("encode: libvpx", r"libvpx"),
    ("convert: libyuv", r"libyuv"),
    ("capture: X11 libraries", r"libX|libxcb"),
    ("libc (copies, system calls)", r"/libc\.so|/libm\.so"),
    ("screenshare's own code", r"/screenshare$"),
    ("Swift runtime, Foundation, Dispatch", r"libswift|libFoundation|lib_Foundation|libdispatch|libBlocksRuntime"),
]


RUNTIME = GROUPS[-1][0]
# Functions of the Swift runtime, standard library, FoundationEssentials and Dispatch linked into
# the binary, and the marks of a specialization made for the caller's types.
RUNTIME_FUNCTION = re.compile(r"^(_?swift_|swift::|\$ss|\$sS[a-zA-Z]|\$s20FoundationEssentials|\$s8Dispatch"
                              r"|_?dispatch_|\$s17_StringProcessing|\$s12_RegexParser|\$s12_Concurrency)")
SPECIALIZED = re.compile(r"T[fg][0-9]|Tt[0-9]")


def group_of(obj, fn=""):
    for name, pattern in GROUPS:
        if re.search(pattern, obj):
            if name == "screenshare's own code" and RUNTIME_FUNCTION.match(fn) and not SPECIALIZED.search(fn):
                return RUNTIME
            return name
    return "other"


def self_costs(path):
    """Exclusive Ir by (object path, function name)."""
    objects = {}  # compressed names: objects (ob=, cob=) and functions (fn=, cfn=) have one table each
    functions = {}
    costs = defaultdict(int)
    obj = "???"
    fn = "???"
    skip_next = False

    def resolve(value, names):
        m = re.match(r"\((\d+)\)(?: (.*))?$", value)
        if not m:
            return value
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), "???")

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            c = line[0]
            if line.startswith("ob="):
                obj = resolve(line[3:], objects)
            elif line.startswith("cob="):
                resolve(line[4:], objects)  # defines a compressed name for later lines
            elif line.startswith("fn="):
                fn = resolve(line[3:], functions)
            elif line.startswith("cfn="):
                resolve(line[4:], functions)
            elif line.startswith("calls="):
                skip_next = True
            elif c.isdigit() or c in "+-*":
                if skip_next:
                    skip_next = False
                    continue
                parts = line.split()
                if len(parts) >= 2:
                    costs[(obj, fn)] += int(parts[1])
    return costs


def main():
    out = sys.argv[1]
    runs = []
    for arg in sys.argv[2:]:
        label, content, encoded, captured, path = arg.split(":", 4)
        by_group = defaultdict(int)
        for (obj, fn), ir in self_costs(path).items():
            by_group[group_of(obj, fn)] += ir
        runs.append((label, content, int(encoded), captured, by_group))
    names = [g for g, _ in GROUPS] + ["other"]
    lines = ["| content | binary | frames encoded | pictures captured | " + " | ".join(names) + " | total |",
             "|---" * (len(names) + 5) + "|"]
    first = {}
    for label, content, encoded, captured, by_group in runs:
        per = {g: by_group.get(g, 0) / max(encoded, 1) / 1e6 for g in names}
        total = sum(by_group.values()) / max(encoded, 1) / 1e6
        cells = [f"{per[g]:.2f}" for g in names] + [f"**{total:.2f}**"]
        if content in first:
            base, base_total = first[content]
            cells = [f"{per[g]:.2f} ({per[g] - base[g]:+.2f})" for g in names] + \
                    [f"**{total:.2f}** ({total - base_total:+.2f}, {100 * (total / base_total - 1):+.0f} %)"]
        else:
            first[content] = (per, total)
        lines.append(f"| {content} | {label} | {encoded} | {captured} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    with open(out, "a") as f:
        f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
