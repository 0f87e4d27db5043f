# Sourced by the check scripts: `run_check NAME COMMAND...` runs the command with its output to
# "$tmp/log"; prints OK, or FAIL and the log, with the seconds it took (a slow CI run shows where
# its time went), and adds NAME to the array `failed`. The script sets `tmp` (a folder of its
# own) and `failed=()` first.
run_check() {
    local name=$1 started=$SECONDS
    shift
    if "$@" >"$tmp/log" 2>&1; then
        echo "OK   $name ($((SECONDS - started)) s)"
    else
        sed 's/^/       /' "$tmp/log"
        echo "FAIL $name ($((SECONDS - started)) s)"
        failed+=("$name")
    fi
}
