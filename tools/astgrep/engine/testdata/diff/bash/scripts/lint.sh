#!/bin/sh
# Runs the linters over the tree.
status=0
for dir in cmd internal pkg; do
    if [ -d "$dir" ]; then
        echo "linting $dir"
        gofmt -l "$dir" || status=1
    fi
done
for tool in gofmt go vet; do
    command -v "$tool" >/dev/null || echo "missing $tool"
done
exit $status
