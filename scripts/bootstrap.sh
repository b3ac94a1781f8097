#!/usr/bin/env bash
# Make .venv hold Tracelake with the given extras (e.g. "dev" or "dev,bench"), installing only
# when pyproject.toml changed since the last install. Says plainly what is missing otherwise.
set -euo pipefail
extras="${1:-}"
venv="${VENV:-.venv}"

find_python() {
  for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

if [ ! -x "$venv/bin/python" ]; then
  python=$(find_python) || {
    echo "tracelake: needs Python >= 3.11 (none found on PATH as python3.11+ or python3)." >&2
    exit 1
  }
  "$python" -m venv "$venv" || {
    echo "tracelake: '$python -m venv' failed; install the venv module (Debian: apt-get install python3-venv)." >&2
    exit 1
  }
fi

# PySpark 4 runs on Java 17 or newer; say so before pip spends minutes on the wheel.
java_major() {
  java -version 2>&1 | sed -n 's/.*version "\([0-9]*\)[."].*/\1/p' | head -n 1
}
if ! command -v java >/dev/null 2>&1; then
  echo "tracelake: needs Java 17+ for Spark and found no 'java' on PATH (Debian: apt-get install openjdk-17-jre-headless)." >&2
  exit 1
fi
major=$(java_major)
if [ -n "$major" ] && [ "$major" -lt 17 ]; then
  echo "tracelake: needs Java 17+ for Spark; 'java' on PATH is version $major (set JAVA_HOME/PATH to a newer JDK)." >&2
  exit 1
fi

stamp="$venv/.installed-${extras//,/-}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "tracelake: installing into $venv ${extras:+(extras: $extras)}"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  target="."
  [ -n "$extras" ] && target=".[$extras]"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$target"
  touch "$stamp"
fi
