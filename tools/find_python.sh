#!/bin/sh
# Which Python builds the course's .venv (used by the Makefile and .ci/run). The supported versions are
# pyproject.toml's requires-python. $PYTHON, when set, is used if it is supported; otherwise the newest supported
# python3.X on PATH, then python3, then python. Prints "PATH X.Y" on stdout and says which it chose on stderr.
# None supported: one line on stderr naming the supported versions and the quickest ways to get one; exit 2.
# Shell built-ins only (besides the interpreters it tries), so it works on a bare PATH.
case "$0" in */*) here=${0%/*} ;; *) here=. ;; esac
pyproject="$here/../pyproject.toml"
lo='' hi=''
while IFS= read -r line; do   # requires-python = ">=3.11,<3.15"
  case "$line" in
    requires-python*'">=3.'*',<3.'*'"'*)
      lo=${line#*'>=3.'}; lo=${lo%%[!0-9]*}
      hi=${line#*'<3.'}; hi=${hi%%[!0-9]*} ;;
  esac
done < "$pyproject"
case "$lo$hi" in '' | *[!0-9]*) echo "find_python: cannot read requires-python from $pyproject" >&2; exit 2 ;; esac
supported="3.$lo to 3.$((hi - 1))"

version_of() {   # "3.13" for a working interpreter, nothing for a missing, broken or non-Python one
  "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null </dev/null
}

supports() {     # 0 when $1 is a version "3.N" with lo <= N < hi
  case "$1" in 3.*) ;; *) return 1 ;; esac
  case "${1#3.}" in '' | *[!0-9]*) return 1 ;; esac
  [ "${1#3.}" -ge "$lo" ] && [ "${1#3.}" -lt "$hi" ]
}

choose() {       # print the choice if $1 is a supported interpreter
  path=$(command -v "$1" 2>/dev/null) || return 1
  version=$(version_of "$path")
  supports "$version" || return 1
  echo "Python: $path (Python $version)$2" >&2
  echo "$path $version"
}

if [ -n "${PYTHON:-}" ]; then
  choose "$PYTHON" ", as PYTHON asks" && exit 0
  got=$(version_of "$PYTHON")
  [ -n "$got" ] && got="Python $got" || got="not a Python that runs here"
  echo "PYTHON=$PYTHON is $got; the course needs Python $supported (unset PYTHON to let make choose)" >&2
  exit 2
fi
minor=$((hi - 1))
while [ "$minor" -ge "$lo" ]; do
  choose "python3.$minor" "" && exit 0
  minor=$((minor - 1))
done
choose python3 "" && exit 0
choose python "" && exit 0
echo "No supported Python on PATH: the course needs Python $supported. Quickest: \`uv python install 3.$((hi - 1))\`," \
  "\`conda env create -f environment.yml\`, or your OS package (apt install python3-venv, dnf install python3," \
  "brew install python@3.$((hi - 1))), then make PYTHON=/path/to/python3.X ..." >&2
exit 2
