# Sourced by the scripts: make ./.venv exist with the project and the extras named in
# $SIGNOFF_EXTRAS installed (a variable, not an argument: a script that sources this with no
# arguments would hand over its own). Re-installs only when pyproject.toml changed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
extras="${SIGNOFF_EXTRAS:-}"
venv="$root/.venv"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
stamp="$venv/.signoff-installed${extras:+-$extras}"
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ]; then
  log="$venv/install.log"
  echo "installing Signoff${extras:+ with [$extras]} into $venv (a minute or two the first time)" >&2
  if ! { "$venv/bin/python" -m pip install --quiet --upgrade pip &&
         "$venv/bin/python" -m pip install --quiet -e "$root${extras:+[$extras]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "installing the project into $venv failed (log above)" >&2
    exit 1
  fi
  touch "$stamp"
fi
export PATH="$venv/bin:$PATH"
cd "$root"
