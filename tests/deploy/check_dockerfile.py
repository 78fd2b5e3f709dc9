#!/usr/bin/env python3
"""ctest deploy_dockerfile_runtime_libs: static checks of deploy/Dockerfile, which cannot be built
here (no Docker engine). Verifies the shape (multi-stage Debian 12, slim runtime, non-root user,
HEALTHCHECK through `banditctl health`) and that the runtime stage installs the Debian package of
every shared library that banditd, banditctl and bandit-traffic (as built on this Debian 12
machine) link to, except those debian:12-slim already has (Essential and priority-required packages and their
dependencies)."""
import os
import re
import subprocess
import sys

src = os.environ.get("BANDIT_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
text = open(os.path.join(src, "deploy", "Dockerfile")).read()
errors = []

# Join continued lines, then split into stages.
lines = re.sub(r"\\\n", " ", text).splitlines()
stages = []
for ln in lines:
    s = ln.strip()
    if s.upper().startswith("FROM "):
        stages.append([s])
    elif stages and s and not s.startswith("#"):
        stages[-1].append(s)
if len(stages) < 2:
    errors.append(f"expected a multi-stage build, found {len(stages)} stage(s)")
else:
    if not re.match(r"FROM debian:12(\s|$)", stages[0][0]):
        errors.append(f"build stage must be FROM debian:12, got '{stages[0][0]}'")
    if not re.match(r"FROM debian:12-slim(\s|$)", stages[-1][0]):
        errors.append(f"runtime stage must be FROM debian:12-slim, got '{stages[-1][0]}'")
runtime = stages[-1] if stages else []
users = [s for s in runtime if s.upper().startswith("USER ")]
if not users or users[-1].split()[1].split(":")[0] in ("root", "0"):
    errors.append("runtime stage must end as a non-root USER")
hc = [s for s in runtime if s.upper().startswith("HEALTHCHECK ")]
if not hc or "banditctl" not in hc[0] or "health" not in hc[0]:
    errors.append("runtime stage needs a HEALTHCHECK running `banditctl ... health`")
for b in ("banditd", "banditctl", "bandit-traffic"):
    if not any(s.startswith("COPY --from=") and f"/bin/{b}" in s for s in runtime):
        errors.append(f"runtime stage does not copy {b} from the build stage")

installed = set()
for s in runtime:
    m = re.search(r"apt-get install (.*?)(&&|$)", s)
    if m:
        installed |= {t for t in m.group(1).split() if not t.startswith("-")}
if not installed:
    errors.append("runtime stage installs no packages")


def binary_libs(binary):
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    return [m.group(1) for m in re.finditer(r"=>\s+(\S+)\s+\(", out)]


def packages_of(paths):
    """Maps each library path to its Debian package with one `dpkg -S` call. Tries the path, its
    real path and the usrmerge twin (/lib/... vs /usr/lib/...)."""
    variants = {}
    for path in paths:
        cands = {path, os.path.realpath(path)}
        for c in list(cands):
            cands.add(c[4:] if c.startswith("/usr/") else "/usr" + c)
        variants[path] = cands
    everything = sorted(set().union(*variants.values())) if variants else []
    out = subprocess.run(["dpkg", "-S"] + everything, capture_output=True, text=True).stdout
    owner = {}
    for ln in out.splitlines():
        pkgs, _, file = ln.partition(": ")
        owner[file.strip()] = pkgs.split(",")[0].split(":")[0].strip()
    return {p: next((owner[c] for c in sorted(v) if c in owner), None) for p, v in variants.items()}


libs_by_binary = {}
for env, default in (("BANDITD", "build/bin/banditd"), ("BANDITCTL", "build/bin/banditctl"),
                     ("BANDIT_TRAFFIC", "build/bin/bandit-traffic")):
    binary = os.environ.get(env, default)
    libs_by_binary[os.path.basename(binary)] = binary_libs(binary)
owners = packages_of(sorted({lib for libs in libs_by_binary.values() for lib in libs}))
needed = {}
for binary, libs in libs_by_binary.items():
    for lib in libs:
        pkg = owners.get(lib)
        if pkg is None:
            errors.append(f"{binary}: no Debian package owns {lib}")
            continue
        needed.setdefault(pkg, set()).add(os.path.basename(lib))


def slim_base():
    """Packages debian:12-slim has: Essential or priority-required packages (the minbase variant)
    and everything they depend on, computed from this machine's dpkg database."""
    out = subprocess.run(["dpkg-query", "-W", "-f=${Package}\t${Priority}\t${Essential}\t"
                          "${Pre-Depends}\t${Depends}\t${Provides}\n"],
                         capture_output=True, text=True, check=True).stdout
    deps, provides, roots = {}, {}, []
    for ln in out.splitlines():
        name, prio, essential, pre, dep, prov = (ln.split("\t") + [""] * 6)[:6]
        alts = []
        for d in filter(None, (x.strip() for x in (pre + "," + dep).split(","))):
            alts.append([re.split(r"[\s(:]", a.strip())[0] for a in d.split("|")])
        deps[name] = alts
        for pv in filter(None, (x.strip() for x in prov.split(","))):
            provides.setdefault(re.split(r"[\s(]", pv)[0], name)
        if prio == "required" or essential == "yes":
            roots.append(name)
    seen, todo = set(), list(roots)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        for alts in deps.get(n, []):
            for a in alts:  # the first alternative that is installed here
                a = a if a in deps else provides.get(a)
                if a:
                    todo.append(a)
                    break
    return seen


base = slim_base()
for pkg, libs in sorted(needed.items()):
    if pkg in installed or pkg in base:
        continue
    errors.append(f"runtime stage misses package {pkg} for {', '.join(sorted(libs))}")
unused = installed - set(needed)
print("runtime packages needed:", " ".join(sorted(needed)))
print("  of which in debian:12-slim already:", " ".join(sorted(set(needed) & base)))
print("runtime packages installed by the Dockerfile:", " ".join(sorted(installed)))
if unused:
    print("note: installed but not linked directly:", " ".join(sorted(unused)))
if errors:
    print("FAILED:\n  " + "\n  ".join(errors))
    sys.exit(1)
print("OK: Dockerfile runtime stage covers every linked library")
