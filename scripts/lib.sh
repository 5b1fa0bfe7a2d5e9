# Shared helpers of the project's set-up scripts (sourced, not run).

# Runs apt-get as root, or through sudo when not root.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# need_debian_packages PKG:"check command" ...: installs each package whose check fails.
need_debian_packages() {
    local missing=() spec pkg check
    for spec in "$@"; do
        pkg=${spec%%:*}
        check=${spec#*:}
        if ! bash -c "$check" >/dev/null 2>&1; then missing+=("$pkg"); fi
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "installing Debian packages: ${missing[*]}" >&2
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

# Creates ./.venv with the machine's python3 unless it exists.
ensure_venv() {
    if [ ! -x .venv/bin/python ]; then
        python3 -m venv .venv
        .venv/bin/pip install --quiet --disable-pip-version-check --upgrade pip
    fi
}
