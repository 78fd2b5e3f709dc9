#!/usr/bin/python3
"""README.md names every served policy and every document.

    readme_lists_check.py SOURCE_DIR

Served policies are the names in core/registry.cc's RegisteredPolicies() (what CreatePolicy
accepts); each must appear in README.md as `name`. Documents are docs/*.md and the folders under
docs/ holding pages (docs/reproductions/); each must appear in README.md as `docs/...`. Fails,
naming each one missing."""
import os
import re
import sys

src = sys.argv[1]
readme = open(os.path.join(src, "README.md"), encoding="utf-8").read()
registry = open(os.path.join(src, "core/registry.cc"), encoding="utf-8").read()

m = re.search(r"RegisteredPolicies\(\)\s*\{(.*?)\n\}", registry, re.S)
if not m:
    sys.exit("core/registry.cc: RegisteredPolicies() not found")
served = re.findall(r'\{PolicyConfig::k\w+,\s*"([a-z0-9_]+)"', m.group(1))
if not served:
    sys.exit("core/registry.cc: no registrations found in RegisteredPolicies()")

docs_dir = os.path.join(src, "docs")
documents = []
for name in sorted(os.listdir(docs_dir)):
    path = os.path.join(docs_dir, name)
    if name.endswith(".md") and os.path.isfile(path):
        documents.append(f"docs/{name}")
    elif os.path.isdir(path) and any(f.endswith(".md") for f in os.listdir(path)):
        documents.append(f"docs/{name}/")

errors = [f"served policy `{p}` (core/registry.cc) is not named in README.md"
          for p in served if f"`{p}`" not in readme]
errors += [f"{d} is not listed in README.md" for d in documents
           if d not in readme and d.rstrip("/") not in readme]
if errors:
    print("\n".join(errors))
    sys.exit(1)
print(f"README.md names all {len(served)} served policies and all {len(documents)} documents")
