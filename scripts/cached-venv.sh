# Sourced by setup-env.sh and setup-verl-env.sh. A virtualenv lives in the user cache
# (~/.cache/emobench/NAME-KEY, KEY a hash of what it is built from) and the checkout links to it, so
# a new clone on the same machine reuses it and only a change to its inputs builds another (the old
# one is then removed). emobench is installed in it editable; the link's checkout is the one it names.

# cached_venv LINK NAME KEY BUILD: BUILD is a function that installs into the venv given as $1.
cached_venv() {
  local link="$1" name="$2" key="$3" build="$4"
  local cache="${EMOBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/emobench}"
  local built="$cache/$name-$key"
  mkdir -p "$cache"
  (
    flock 9  # one build at a time; a second caller waits, then finds it built
    if [ ! -f "$built/.emobench-complete" ]; then
      rm -rf "$built"  # a build that stopped half-way
      python3 -m venv "$built"
      "$build" "$built"
      echo "$key" > "$built/.emobench-complete"
      # Only this name's older builds (NAME- and a 16-digit key): "venv-*" would also match venv-verl-*.
      find "$cache" -maxdepth 1 -regextype posix-extended -regex ".*/$name-[0-9a-f]{16}" ! -name "$name-$key" \
        -exec rm -rf {} +
    fi
  ) 9>"$cache/$name.lock"
  if [ -e "$link" ] && [ ! -L "$link" ]; then
    if [ ! -f "$link/.emobench-setup" ] && [ ! -f "$link/.emobench-verl-setup" ]; then
      echo "error: $link: a folder this script did not make; move it away and run again" >&2
      return 2
    fi
    rm -rf "$link"  # what an older version of this script built in place
  fi
  ln -sfn "$built" "$link"
  # The editable install names the checkout that last set it up: point it at this one.
  local here python at
  here="$(pwd -P)"
  python="$(realpath "$link")/bin/python"
  at="$(cd / && "$python" -c 'import emobench, os; print(os.path.dirname(os.path.dirname(os.path.realpath(emobench.__file__))))' 2>/dev/null || true)"
  if [ "$at" != "$here" ]; then
    "$python" -m pip --disable-pip-version-check -q install --no-deps -e .
  fi
}

# venv_key FILE...: the hash of pyproject.toml's [project] and [build-system] tables (what is
# installed; not the tools' settings), the files, and the Python that builds the venv.
venv_key() {
  (python3 -c 'import json, tomllib; t = tomllib.load(open("pyproject.toml", "rb")); print(json.dumps([t["project"], t["build-system"]], sort_keys=True))'
   cat "$@"; python3 --version) | sha256sum | cut -c1-16
}
