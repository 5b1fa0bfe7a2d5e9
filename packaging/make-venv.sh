#!/bin/sh
# make-venv: (re)builds the application venv /opt/stanpkg on the machine it runs on, from
# the wheels the deb/rpm ship in /usr/lib/stanpkg/wheels (CPython 3.11, 3.12 and 3.13):
# the venv is made at install time with the machine's own interpreter, so one package
# works on every release whose python3 (or python3.11/3.12/3.13) is one of those.
# Run by the deb's postinst and the rpm's %post; an operator runs it again after changing
# the system's Python (e.g. a dist-upgrade), or to add an extra:
#   /usr/lib/stanpkg/make-venv [--extra NAME]...
# Bundled extras (postgres, mysql, crc) install offline; others (spark) come from the package
# index pip is configured with, and are remembered in /etc/stanpkg/extras for the next run.
# Environment: STANPKG_WHEELS, STANPKG_PREFIX, STANPKG_EXTRAS_FILE, STANPKG_PYTHON.
set -eu
wheels=${STANPKG_WHEELS:-/usr/lib/stanpkg/wheels}
prefix=${STANPKG_PREFIX:-/opt/stanpkg}
extras_file=${STANPKG_EXTRAS_FILE:-/etc/stanpkg/extras}
bundled_extras=postgres,mysql,crc

say() { echo "stanpkg make-venv: $*" >&2; }

extras=""
while [ $# -gt 0 ]; do
    case $1 in
        --extra) extras="$extras $2"; shift 2 ;;
        --extra=*) extras="$extras ${1#--extra=}"; shift ;;
        *) say "usage: make-venv [--extra NAME]..."; exit 2 ;;
    esac
done

# The interpreter: the first one whose CPython version the wheels were downloaded for.
supported=$(cat "$wheels/PYTHON_VERSIONS")
python=""
for candidate in ${STANPKG_PYTHON:-} python3 python3.13 python3.12 python3.11; do
    path=$(command -v "$candidate" 2>/dev/null) || continue
    version=$("$path" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || continue
    case " $supported " in *" $version "*) python=$path; break ;; esac
done
if [ -z "$python" ]; then
    say "no Python for the bundled wheels: install one of python$supported (found none)"
    exit 1
fi

# Built beside the live venv and swapped in at the end: a running server keeps a whole
# tree until it restarts, and a failed build leaves the old venv in place.
new="$prefix.new"
rm -rf "$new"
# --without-pip: Debian's ensurepip is a separate package (python3-venv); pip runs from its
# bundled wheel instead and is not left in the venv.
"$python" -m venv --without-pip "$new"
pip_wheel=$(ls "$wheels"/pip-*.whl)
pip() {
    "$new/bin/python" "$pip_wheel/pip" --disable-pip-version-check --no-input --quiet \
        install --no-compile "$@"
}
# --isolated: the bundled set is installed exactly, whatever pip configuration root has.
pip --isolated --no-index --find-links "$wheels" "stanpkg[$bundled_extras]"

# Extras asked for now or by an earlier run, from the index (only these touch a network).
[ -f "$extras_file" ] && extras="$extras $(cat "$extras_file")"
extras=$(echo "$extras" | tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ')
wanted=""
for extra in $extras; do
    if pip --find-links "$wheels" "stanpkg[$extra]"; then
        wanted="$wanted $extra"
    else
        say "could not install the $extra extra (no package index?); the venv has the rest"
    fi
done
if [ -n "$wanted" ]; then
    echo "$wanted" | tr ' ' '\n' | sed '/^$/d' >"$extras_file"
fi

# bin/ keeps the application's commands, nats-server and the interpreter links only.
find "$new/bin" -mindepth 1 \( -type f -o -type l \) \
    ! -name stanpkg ! -name nats-streaming-server ! -name nats-server ! -name 'python*' -delete
rm -rf "$new/include"
# Shebangs and pyvenv.cfg name the build path: point them at the live one.
grep -rlI -F "$new" "$new" | while IFS= read -r file; do
    sed -i "s|$new|$prefix|g" "$file"
done
# Byte-code now, recording the live paths: the service cannot write under /opt.
"$new/bin/python" -m compileall -q -d "$prefix/lib" "$new/lib" >/dev/null || true
rm -rf "$prefix.old"
[ -e "$prefix" ] && mv "$prefix" "$prefix.old"
mv "$new" "$prefix"
rm -rf "$prefix.old"
# Which build pip took: the compiled wheel of this Python, or the pure one.
version=$("$prefix/bin/stanpkg" --version 2>&1)
say "$prefix ready ($(echo "$version" | head -n 1), $(echo "$version" | tail -n 1), $python)"
