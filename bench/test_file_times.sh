#!/bin/sh
# Wall time of test files, old tree against new, alternating: used for issue #35's zygote
# rounds (docs/testing.md). Usage: bench/test_file_times.sh OLD_TREE NEW_TREE ROUNDS GROUP...
# where each GROUP is "name:file file ..." run with -n 2 --dist loadfile, or
# "name:old files|new files" when the files differ (a file split in two, renamed). OLD_TREE is an
# export of the old commit (git archive COMMIT | tar -x -C DIR) sharing NEW_TREE's .venv.
# Prints one line a run: round, group, tree, seconds, pytest's summary, load at start and end.
set -u
old=$1 new=$2 rounds=$3
shift 3
r=1
while [ "$r" -le "$rounds" ]; do
    for group in "$@"; do
        name=${group%%:*}
        files=${group#*:}
        if [ $((r % 2)) -eq 1 ]; then order="$old $new"; else order="$new $old"; fi
        for tree in $order; do
            case $files in
                *"|"*) if [ "$tree" = "$old" ]; then run=${files%%|*}; else run=${files#*|}; fi ;;
                *) run=$files ;;
            esac
            start_load=$(cut -d' ' -f1 /proc/loadavg)
            t0=$(date +%s.%N)
            # shellcheck disable=SC2086
            summary=$(cd "$tree" && .venv/bin/pytest -q -p no:cacheprovider $run -n 2 \
                --dist loadfile 2>&1 | tail -1)
            t1=$(date +%s.%N)
            end_load=$(cut -d' ' -f1 /proc/loadavg)
            which=new
            [ "$tree" = "$old" ] && which=old
            printf '%s\t%s\t%s\t%.0f s\t%s\tload %s -> %s\n' "$r" "$name" "$which" \
                "$(echo "$t1 - $t0" | bc)" "$summary" "$start_load" "$end_load"
        done
    done
    r=$((r + 1))
done
