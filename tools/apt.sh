# Sourced by the tools: install_missing NAME PACKAGE... installs Debian packages when run as
# root, or says how to and exits when not. NAME prefixes the messages.
install_missing() {
  local name=$1
  shift
  [ $# -gt 0 ] || return 0
  if [ "$(id -u)" = 0 ]; then
    echo "$name: installing $*" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "$@" >/dev/null 2>&1 || {
      apt-get update -qq >/dev/null && apt-get install -y -qq "$@" >/dev/null
    }
  else
    echo "$name: missing system packages: $*" >&2
    echo "$name: install them with: sudo apt-get install -y $*" >&2
    exit 1
  fi
}
