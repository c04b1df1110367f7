"""Every external command that the appliance runs exists on the image, with the options it is given: the overlay's
init scripts, helpers, inittab and udev rules, and the Python package (the lab's server aside: it never runs on the
image). On the image a command is either a program of a package that package/ssdbench selects (util-linux's lsblk,
e2fsprogs' resize2fs, ...; Buildroot installs BusyBox without overwriting them), or a BusyBox applet that
board/ssdbench/busybox.config enables. An applet's options are checked against what BusyBox 1.38 takes with that
configuration (OPTIONS, from its usage texts); a selected package's program is the upstream one, whose options
the host's tests and make test-vm run."""

import ast
import pathlib
import re

import pytest

TOP = pathlib.Path(__file__).resolve().parents[2]
OVERLAY = TOP / "overlay"
PACKAGE = TOP / "webui" / "ssdbench"
BUSYBOX_CONFIG = TOP / "board" / "ssdbench" / "busybox.config"

# The programs that the packages selected by package/ssdbench (and eudev) install on the image. util-linux:
# Buildroot's BINARIES option builds every program (--enable-all-programs) but those of its options that
# package/ssdbench leaves unselected (agetty, fsck, hwclock, kill, more, su, ... are not here).
PROGRAMS = {
    "util-linux": """blkdiscard blkid blkzone blockdev cfdisk chcpu col colcrt colrm column ctrlaltdel dmesg fdisk
        findfs findmnt flock fsfreeze fstrim getopt hexdump isosize ldattach look losetup lsblk lscpu lsipc lsirq
        lslocks lsns mcookie mkfs mkswap mount namei partx addpart delpart resizepart prlimit readprofile renice
        rev rtcwake script scriptreplay setarch setsid sfdisk swaplabel swapoff swapon umount uuidgen uuidparse
        whereis wipefs""",
    "e2fsprogs": """badblocks chattr dumpe2fs e2fsck e2label fsck.ext2 fsck.ext3 fsck.ext4 lsattr mke2fs mkfs.ext2
        mkfs.ext3 mkfs.ext4 resize2fs tune2fs""",
    "dosfstools": "fatlabel fsck.fat fsck.vfat mkfs.fat mkfs.vfat",
    "exfatprogs": "mkfs.exfat fsck.exfat tune.exfat exfatlabel",
    "fio": "fio",
    "nvme": "nvme",
    "hdparm": "hdparm",
    # BR2_PACKAGE_SG3_UTILS_PROGS: every sg_* program; these are the ones the appliance runs (drives behind an HBA).
    "sg3_utils": "sg_inq sg_vpd sg_sanitize sg_format sg_unmap sg_readcap sg_turs sg_requests sg_logs",
    "smartmontools": "smartctl smartd",
    # kbd: its keyboard programs; the appliance runs loadkeys, with the keymaps kbd installs.
    "kbd": """chvt deallocvt dumpkeys fgconsole getkeycodes kbd_mode kbdinfo kbdrate loadkeys loadunimap mapscrn
        openvt psfxtable setfont setkeycodes setleds setmetamode setvtrgb showconsolefont showkey unicode_start
        unicode_stop""",
    "python3": "python3",
    "eudev": "udevadm udevd",
    "ssdbench": "ssdbench",
    # Buildroot's rcS and rcK, which start and stop /etc/init.d/S??*.
    "initscripts": "rcS rcK",
}
PROGRAM_OF = {name: package for package, names in PROGRAMS.items() for name in names.split()}

# ash's builtins, and the configuration symbol that each one needs, if any.
BUILTINS = {
    **dict.fromkeys(re.findall(r"\S+", ". : break cd continue eval exec exit export false kill local read return")),
    **dict.fromkeys(re.findall(r"\S+", "set shift trap true umask unset wait command type")),
    "echo": "ASH_ECHO",
    "printf": "ASH_PRINTF",
    "test": "ASH_TEST",
    "[": "ASH_TEST",
}
# An applet whose configuration symbol is not its name made upper case.
APPLET_SYMBOL = {"sh": "SH_IS_ASH", "[": "TEST1", "[[": "TEST2", "sysctl": "BB_SYSCTL"}

# The options that BusyBox 1.38 takes, each applet's as in getopt ("c:" takes a value), each key needing the
# configuration symbol it maps to (None: always there). `dd`'s operands are checked as its options.
OPTIONS = {
    "arping": {"fqbDUA c: w: I: s:": None},
    "cat": {"nbvteA": None},
    "cmp": {"ls n:": None},
    "cp": {"arPLHpfinlsTu t:": None},
    "date": {"R u s: d: I: r: D:": None},
    "dd": {
        "if= of= bs= count= skip= seek=": None,
        "conv=notrunc conv=noerror conv=sync conv=fsync": "FEATURE_DD_IBS_OBS",
        "iflag=direct oflag=direct iflag=fullblock": "FEATURE_DD_IBS_OBS",
    },
    "grep": {"HhnlLoqvsrRiwFEx m: e: f:": None, "A: B: C:": "FEATURE_GREP_CONTEXT"},
    "head": {"n: c: qv": None},
    "hostname": {"sidf F:": None},
    "ip": {"4 6 o": None},
    "ln": {"sfnbtv S:": None},
    "ls": {"1AaCxdlins": None, "t": "FEATURE_LS_TIMESTAMPS", "rSXv": "FEATURE_LS_SORTFILES"},
    "lspci": {"mk": None},
    "mkdir": {"p m:": None},
    "mkfifo": {"m:": None},
    "mv": {"finT t:": None},
    "od": {"abcdfhilovxs t: A: N: j: S: w:": None},
    "paste": {"s d:": None},
    "poweroff": {"nf d:": None},
    "readlink": {"n": None, "fv": "FEATURE_READLINK_FOLLOW"},
    "rm": {"irf": None},
    "rmdir": {"p": None},
    "sed": {"nrE i e: f:": None},
    "setsid": {"c": None},
    "sh": {"l c: s i e x u": None},
    "sleep": {"": None},
    "sort": {"nru": None, "ghMcszbdfiok o: t:": "FEATURE_SORT_BIG"},
    "stat": {"Lt": None, "c:": "FEATURE_STAT_FORMAT", "f": "FEATURE_STAT_FILESYSTEM"},
    "tee": {"ai": None},
    "tr": {"cds": None},
    "udhcpc": {"fbqRBoCn t: T: A: i: s: p: r: V: F: x: O:": None, "v": "UDHCP_VERBOSE"},
    "wc": {"clwL": None},
    "xargs": {"r": None, "t": None, "n: s:": None, "0": "FEATURE_XARGS_SUPPORT_ZERO_TERM"},
}
# Words that wrap another command, and their options that take a value.
WRAPPERS = {"exec": "", "setsid": "", "xargs": "ns"}
KEYWORDS = set(re.findall(r"\S+", "if then else elif fi do done while until ! { } in"))
# Commands that the code runs only away from the image, by why.
NOT_ON_THE_IMAGE = {
    "git": "the release's name in a checkout: the image has /etc/ssdbench-release (ssdbench/__init__.py)",
}


def enabled(config_text):
    return {m.group(1) for m in re.finditer(r"^CONFIG_(\w+)=y$", config_text, re.M)}


# --- The shell: a small reader of the POSIX shell that the overlay's scripts are written in ---------------------


def _balanced(text, i):
    """The end of the parenthesised text that starts just after text[i - 1] == '(': the index of its ')'."""
    depth, quote = 1, None
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError("unbalanced parentheses")


def _arithmetic(text, i, commands):
    """Past the arithmetic expansion $((...)) at text[i], its $(...) commands added to `commands`."""
    end = _balanced(text, i + 2)
    for sub in re.finditer(r"\$\((?!\()", text[i + 3 : end]):
        start = i + 3 + sub.end()
        commands.extend(shell_commands(text[start : _balanced(text, start)]))
    return end + 1


def shell_commands(text):
    """Each simple command of a shell script as its list of words (quotes removed; an expansion left as `$`),
    those of $(...) and of arithmetic's $(...) included; redirections, case patterns and comments left out."""
    commands, words, word = [], [], None
    pattern = []  # a stack: True while the case at its top reads a pattern

    def end_word():
        nonlocal word
        if word is not None:
            words.append(word)
            word = None

    def end_command():
        end_word()
        if words[:1] == ["esac"]:
            pattern.pop()
            words.clear()
        if words:
            commands.append(list(words))
            if words[0] == "case":
                pattern.append(True)
            words.clear()

    i, text = 0, text.replace("\\\n", " ")
    while i < len(text):
        c = text[i]
        if pattern and pattern[-1] and word is None and not words:
            if c in " \t\n;":
                i += 1
                continue
            if text.startswith("esac", i) and not text[i + 4 : i + 5].strip(" \t\n;)"):
                pattern.pop()
                i += 4
                continue
            if c == "#":
                i = text.find("\n", i)
                i = len(text) if i < 0 else i
                continue
            close = text.index(")", i)
            pattern[-1] = False
            i = close + 1
            continue
        if c == "#" and word is None:
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
        elif c in " \t":
            end_word()
            i += 1
        elif c == "\n" or c == ";":
            if text.startswith(";;", i) and pattern:
                end_command()
                pattern[-1] = True
                i += 2
                continue
            end_command()
            i += 1
        elif c in "|&":
            end_command()
            i += 2 if text[i + 1 : i + 2] == c else 1
        elif c in "<>":
            if word is not None and word.isdigit():
                word = None
            end_word()
            i += 1
            while i < len(text) and text[i] in "<>&":
                i += 1
            while i < len(text) and text[i] in " \t":
                i += 1
            # The redirection's target: one word, read and dropped.
            saved = list(words)
            words.clear()
            j = i
            while j < len(text) and text[j] not in " \t\n;|&<>()":
                if text[j] in "'\"":
                    j = text.index(text[j], j + 1)
                j += 1
            i = j
            words.extend(saved)
        elif c == "'":
            end = text.index("'", i + 1)
            word = (word or "") + text[i + 1 : end]
            i = end + 1
        elif c == '"':
            j, value = i + 1, ""
            while text[j] != '"':
                if text[j] == "\\":
                    value += text[j + 1]
                    j += 2
                elif text.startswith("$((", j):
                    j = _arithmetic(text, j, commands)
                    value += "$"
                elif text.startswith("$(", j):
                    end = _balanced(text, j + 2)
                    commands.extend(shell_commands(text[j + 2 : end]))
                    value += "$"
                    j = end + 1
                else:
                    value += text[j]
                    j += 1
            word = (word or "") + value
            i = j + 1
        elif text.startswith("$((", i):
            i = _arithmetic(text, i, commands)
            word = (word or "") + "$"
        elif text.startswith("$(", i):
            end = _balanced(text, i + 2)
            commands.extend(shell_commands(text[i + 2 : end]))
            word = (word or "") + "$"
            i = end + 1
        elif c == "(":
            if word is not None and text[i + 1 : i + 2] == ")":  # a function's definition: name() {
                word = None
                words.clear()
                i += 2
                continue
            end_command()
            i += 1
        elif c == ")":
            end_command()
            i += 1
        elif c == "\\":
            word = (word or "") + text[i + 1 : i + 2]
            i += 2
        else:
            word = (word or "") + c
            i += 1
    end_command()
    return commands


def run_by(words, functions, variables):
    """The commands that one simple command runs: [(name, arguments)], its wrapper's included."""
    words = list(words)
    while words and (words[0] in KEYWORDS or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0])):
        words.pop(0)
    if not words or words[0] in ("for", "case"):
        return []
    name, args = words[0], words[1:]
    name = variables.get(name, name)
    if name in functions or "$" in name:
        return []
    found = [(name, args)]
    if name in WRAPPERS:
        rest = list(args)
        while rest and rest[0].startswith("-") and rest[0] != "-":
            option = rest.pop(0)
            if option[-1:] in WRAPPERS[name] and rest:
                rest.pop(0)
        found += run_by(rest, functions, variables) if rest else []
    return found


def shell_files():
    scripts = [p for p in OVERLAY.rglob("*") if p.is_file() and p.read_text(errors="replace").startswith("#!/bin/sh")]
    return sorted(scripts)


def from_shell(path):
    text = path.read_text()
    functions = set(re.findall(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\(\)", text, re.M))
    variables = dict(re.findall(r"^([A-Z_][A-Z0-9_]*)=(/[^\s$\"']+)$", text, re.M))
    for words in shell_commands(text):
        for name, args in run_by(words, functions, variables):
            yield name, args, str(path.relative_to(TOP))


def from_inittab():
    path = OVERLAY / "etc" / "inittab"
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            process = line.split(":", 3)[3].lstrip("-")
            for words in shell_commands(process):
                yield from ((name, args, "overlay/etc/inittab") for name, args in run_by(words, set(), {}))


def from_udev_rules():
    for path in sorted((OVERLAY / "etc" / "udev" / "rules.d").glob("*.rules")):
        for program in re.findall(r'(?:RUN|PROGRAM|IMPORT\{program\})\+?="([^"]+)"', path.read_text()):
            words = program.split()
            yield words[0], words[1:], str(path.relative_to(TOP))


# --- Python: the argv lists that the package runs ---------------------------------------------------------------

RUNNERS = {"run", "Popen", "check_output", "check_call", "call"}


def _argv(node, assigned):
    """The constant words of an argv list: the literal's strings (others as `$`), through one local name."""
    if isinstance(node, ast.Name) and node.id in assigned:
        node = assigned[node.id]
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        return None
    words = []
    for element in node.elts:
        if isinstance(element, ast.Constant) and isinstance(element.value, str):
            words.append(element.value)
        elif isinstance(element, ast.Starred):
            inner = _argv(element.value, assigned)
            words.extend(inner or ["$"])
        elif isinstance(element, ast.Call) and getattr(element.func, "attr", "") == "require":
            words.append(element.args[0].value)
        elif isinstance(element, ast.JoinedStr):
            words.append("".join(v.value if isinstance(v, ast.Constant) else "$" for v in element.values))
        else:
            words.append("$")
    return words


def from_python():
    for path in sorted(PACKAGE.rglob("*.py")):
        if "lab" in path.relative_to(PACKAGE).parts:
            continue
        tree = ast.parse(path.read_text())
        where = str(path.relative_to(TOP))
        for function in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda)))]:
            assigned = {}
            for node in ast.walk(function):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    assigned[node.targets[0].id] = node.value
            for node in ast.walk(function):
                argvs = []
                if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in RUNNERS:
                    argvs.append(_argv(node.args[0], assigned) if node.args else None)
                if isinstance(node, ast.Lambda) or (isinstance(node, ast.Return) and node.value is not None):
                    body = node.body if isinstance(node, ast.Lambda) else node.value
                    elements = body.elts if isinstance(body, ast.Tuple) else [body]
                    argvs += [_argv(e, {}) for e in elements if isinstance(e, ast.List)]
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "").endswith("COMMANDS"):
                    argvs += [_argv(v, {}) for v in getattr(node.value, "values", []) if isinstance(v, ast.List)]
                for argv in argvs:
                    if argv and argv[0] != "$" and re.match(r"^[a-z][a-z0-9._-]*$", argv[0]):
                        yield argv[0], argv[1:], where
            # tools.version's flags: {name: the arguments it prints its version with}.
            if getattr(function, "name", "") == "version" and "flags" in assigned:
                for key, value in zip(assigned["flags"].keys, assigned["flags"].values):
                    yield key.value, _argv(value, {}), where


def everything():
    found = []
    for path in shell_files():
        found += from_shell(path)
    found += from_inittab()
    found += from_udev_rules()
    found += from_python()
    return found


# --- The checks -------------------------------------------------------------------------------------------------


def options_used(applet, args):
    """The options of one call, as (option, its value or None); words after -- are operands."""
    used = []
    if applet == "dd":
        for arg in args:
            key, _, value = arg.partition("=")
            for v in value.split(",") if key in ("conv", "iflag", "oflag") else [""]:
                used.append((f"{key}={v}", None))
        return used
    spec = " ".join(OPTIONS.get(applet, {}))
    takes_value = set(re.findall(r"(\w):", spec))
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-" or arg == "$" or re.match(r"^-\d+$", arg) and applet != "ip":
            continue
        if arg.startswith("--"):
            used.append((arg.split("=")[0], None))
            continue
        letters = arg[1:]
        for k, letter in enumerate(letters):
            if letter in takes_value:
                value = letters[k + 1 :] or (rest.pop(0) if rest else "")
                used.append((letter, value))
                break
            used.append((letter, None))
    return used


def problems(found, config_text):
    """What would fail on the image, one line each: a command that it lacks, or an option that its applet does not
    take with this configuration."""
    on = enabled(config_text)
    overlay_files = {"/" + str(p.relative_to(OVERLAY)) for p in OVERLAY.rglob("*") if p.is_file()}
    said = []
    for name, args, where in found:
        if name in NOT_ON_THE_IMAGE:
            continue
        if name.startswith("/"):
            if name in overlay_files:
                continue
            name = name.rsplit("/", 1)[1]
        if name in BUILTINS:
            if BUILTINS[name] and BUILTINS[name] not in on:
                said.append(f"{where}: {name} is not an ash builtin here: CONFIG_{BUILTINS[name]} is not set")
            continue
        if name in PROGRAM_OF:
            continue
        symbol = APPLET_SYMBOL.get(name, re.sub(r"[^A-Z0-9]", "_", name.upper()))
        if symbol not in on:
            said.append(
                f"{where}: {name} is on the image neither as a BusyBox applet (CONFIG_{symbol} is not set) "
                "nor as a program of a selected package"
            )
            continue
        table = OPTIONS.get(name)
        used = options_used(name, args)
        if table is None:
            if used:
                said.append(f"{where}: {name} {' '.join(args)}: its options are not in OPTIONS yet (BusyBox's usage)")
            continue
        for option, _ in used:
            needs = [
                symbol
                for spec, symbol in table.items()
                if option in spec.split() or (len(option) == 1 and option in spec.replace(":", " ").replace(" ", ""))
            ]
            if not needs:
                said.append(f"{where}: {name} {' '.join(args)}: BusyBox's {name} has no option {option}")
            elif all(n is not None and n not in on for n in needs):
                said.append(f"{where}: {name} {' '.join(args)}: {option} needs CONFIG_{needs[0]}, which is not set")
    return sorted(set(said))


def test_the_reader_finds_the_commands_of_a_script():
    script = """#!/bin/sh
# a comment: rm -rf /
start() {
	x=$(cat "/run/$1.pid" 2>/dev/null | head -n 1)
	[ $(($(date +%s) - $(stat -c %Y "$LOCK"))) -lt 10 ] && echo "$x"
	case "$1" in
		a|b) setsid ssdbench clock sync < /dev/null >> /var/log/x 2>&1 &;;
		*) grep -v '^#' /etc/modules | xargs modprobe -a;;
	esac
}
"""
    names = [words[0] for words in shell_commands(script)]
    assert names == ["{", "cat", "head", "x=$", "date", "stat", "[", "echo", "case", "setsid", "grep", "xargs", "}"]
    found = [(n, a) for words in shell_commands(script) for n, a in run_by(words, {"start"}, {})]
    assert ("stat", ["-c", "%Y", "$LOCK"]) in found
    assert ("modprobe", ["-a"]) in found and ("ssdbench", ["clock", "sync"]) in found
    assert ("head", ["-n", "1"]) in found and not any(n in ("rm", "a", "b", "*") for n, _ in found)


def test_the_inventory_fails_on_what_the_image_lacks():
    """Before busybox.config was ours, Buildroot's had no stat, and the diagnostics zip asked BusyBox's lspci,
    which takes only -m and -k, for -nnk: both are found."""
    config = BUSYBOX_CONFIG.read_text().replace("CONFIG_STAT=y", "# CONFIG_STAT is not set")
    said = problems([("stat", ["-c", "%Y", "$"], "dhcp"), ("lspci", ["-nnk"], "logs.py")], config)
    assert said == [
        "dhcp: stat is on the image neither as a BusyBox applet (CONFIG_STAT is not set) nor as a program of a "
        "selected package",
        "logs.py: lspci -nnk: BusyBox's lspci has no option n",
    ]
    config = BUSYBOX_CONFIG.read_text().replace("CONFIG_FEATURE_STAT_FORMAT=y", "")
    assert problems([("stat", ["-c", "%Y"], "dhcp")], config) == [
        "dhcp: stat -c %Y: c needs CONFIG_FEATURE_STAT_FORMAT, which is not set"
    ]


def test_the_inventory_reads_every_part_that_runs_commands():
    found = {(name, where.split("/")[-1]) for name, _, where in everything()}
    for expected in [
        ("udhcpc", "dhcp"),
        ("stat", "dhcp"),
        ("resize2fs", "S30stick"),
        ("/usr/libexec/ssdbench/boot-log", "inittab"),
        ("/usr/libexec/ssdbench/dhcp", "90-ssdbench-dhcp.rules"),
        ("lsblk", "discovery.py"),
        ("lspci", "logs.py"),
        ("hdparm", "purge.py"),
        ("nvme", "quiet.py"),
        ("fio", "tools.py"),
    ]:
        assert expected in found


@pytest.mark.parametrize("part", ["overlay", "python"])
def test_every_command_exists_on_the_image_with_its_options(part):
    found = [f for f in everything() if (f[2].startswith("webui/") == (part == "python"))]
    assert found
    assert problems(found, BUSYBOX_CONFIG.read_text()) == []
