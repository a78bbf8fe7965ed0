# Sourced (not run) by the scripts of deploy/ that read secrets: the
# shell's side of what config.LoadSecretFiles does for siteops. For every
# NAME given, NAME_FILE, when set and not empty, names a file whose content
# (trailing newlines removed) becomes NAME, and NAME_FILE is unset; an empty
# file leaves NAME unset. The programs the script starts (the Temporal
# server, temporal-sql-tool, the temporal CLI, psql) then read NAME as if it
# had been set directly, while the deployments mount secrets as files
# (Kubernetes Secret volumes, compose secrets) instead of writing them into
# the environment of their manifests.
#
#   . "$(dirname "${BASH_SOURCE[0]}")/secret-files.sh"
#   load_secret_files TEMPORAL_SERVER_DB_PASSWORD
#
# Both set (NAME not empty) or a file that cannot be read stops the script,
# naming the variable and the path, never the content.

# load_secret_files NAME...: see above. Returns 1 after the first problem,
# having said what it is on standard error.
load_secret_files() {
  local name file_var path value
  for name in "$@"; do
    file_var="${name}_FILE"
    path="${!file_var:-}"
    if [ -z "$path" ]; then
      unset "$file_var"
      continue
    fi
    if [ -n "${!name:-}" ]; then
      echo "${0##*/}: $name and $file_var are both set; set only one of them ($file_var names a file holding the value)" >&2
      return 1
    fi
    if [ ! -f "$path" ] || [ ! -r "$path" ]; then
      echo "${0##*/}: $file_var=$path cannot be read (missing, not a file, or not readable by uid $(id -u)); make it readable or unset $file_var" >&2
      return 1
    fi
    value="$(cat -- "$path")" || {
      echo "${0##*/}: $file_var=$path cannot be read; make it readable or unset $file_var" >&2
      return 1
    }
    # $(...) removed the trailing newlines; CRs among them go too, as in
    # config.LoadSecretFiles.
    while [[ "$value" == *$'\r' || "$value" == *$'\n' ]]; do
      value="${value%?}"
    done
    # An empty file is an unset setting, as an empty variable is everywhere
    # in siteops: the programs started never see NAME set but empty.
    if [ -n "$value" ]; then
      export "$name=$value"
    else
      unset "$name"
    fi
    unset "$file_var"
  done
}
