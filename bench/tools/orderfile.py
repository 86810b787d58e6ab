#!/usr/bin/env python3
"""The linker's symbol order for the release build, from callgrind dumps of whole runs.

    orderfile.py BINARY OUT CALLGRIND_FILE [...]

Writes to OUT the functions of BINARY (the screenshare executable) that ran in any of the dumps,
hottest first (own instructions summed over the dumps), one symbol name a line, for lld's
--symbol-ordering-file (Scripts/lib/common.sh). The linker then puts the code that runs next to
each other at the start of .text, and the kernel maps far fewer pages of the binary into the
process: it maps a block of pages around every page a process touches (fault-around), so code
that runs scattered through 17 MB of text made most of it resident.

A name defined more than once in BINARY (a local helper that many objects have, such as
`__swift_destroy_boxed_opaque_existential_1Tm`) is left out: the dump does not say which copy
ran, and ordering by it would move every copy's section, with all the code around them, to the
front.

Reads the dump's text format (callgrind_format(5)), compressed names or not: `ob=` names the
object of the cost lines that follow and `fn=` their function, `(N) name` defines the id N and
`(N)` refers to it.
"""
import collections
import re
import subprocess
import sys

NAME = re.compile(r"^\((\d+)\)(?: (.*))?$")


def resolve(table, text):
    """The name in an ob=/fn= line: `(N) name` defines N, `(N)` refers to it, else the text."""
    m = NAME.match(text)
    if not m:
        return text
    if m.group(2) is not None:
        table[m.group(1)] = m.group(2)
    return table.get(m.group(1), "")


def executed(path, binary_name):
    """Own instruction counts of the functions of the object named binary_name in one dump."""
    cost = collections.Counter()
    objects, functions = {}, {}
    ob = fn = ""
    skip_next = False
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("ob="):
                ob = resolve(objects, line[3:])
            elif line.startswith("fn="):
                fn = resolve(functions, line[3:])
                if ob.endswith("/" + binary_name):
                    cost[fn] += 0  # ran, even if it cost nothing of its own in this dump
            elif line.startswith(("cob=", "cfi=", "cfn=", "cfl=")):
                # A callee's names are defined here too; they name the call, not the cost lines.
                table = objects if line.startswith("cob=") else functions if line.startswith("cfn=") else {}
                resolve(table, line[4:])
            elif line.startswith("calls="):
                skip_next = True  # the next cost line is the call's inclusive cost
            elif line[:1].isdigit() or line[:1] in "+-*":
                if skip_next:
                    skip_next = False
                    continue
                if ob.endswith("/" + binary_name):
                    parts = line.split()
                    if len(parts) > 1 and parts[1].isdigit():
                        cost[fn] += int(parts[1])
    return cost


def defined_names(binary):
    """How many times each function name is defined in binary's symbol table."""
    out = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    count = collections.Counter()
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            count[parts[2]] += 1
    return count


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    binary, out, dumps = sys.argv[1], sys.argv[2], sys.argv[3:]
    binary_name = binary.rsplit("/", 1)[-1]
    total = collections.Counter()
    for path in dumps:
        total.update(executed(path, binary_name))
    defined = defined_names(binary)
    names, seen = [], set()
    for fn, _ in sorted(total.items(), key=lambda kv: (-kv[1], kv[0])):
        name = re.sub(r"'\d+$", "", fn)  # callgrind's mark of a recursion level: same function
        if defined.get(name) == 1 and name not in seen:
            seen.add(name)
            names.append(name)
    ambiguous = sum(1 for fn in total if defined.get(re.sub(r"'\d+$", "", fn), 0) > 1)
    if not names:
        sys.exit(f"orderfile.py: no function of {binary_name} ran in the dumps")
    with open(out, "w") as f:
        # lld reads '#' to the end of a line as a comment.
        f.write("# The release build's link order: made by Scripts/bench-callgrind --order-file\n"
                "# (bench/tools/orderfile.py), read by Scripts/lib/common.sh's RELEASE_BUILD_FLAGS.\n")
        f.write("\n".join(names) + "\n")
    print(f"{len(names)} functions ran ({ambiguous} names defined more than once left out): {out}")


if __name__ == "__main__":
    main()
