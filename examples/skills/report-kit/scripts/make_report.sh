#!/bin/sh
# make_report.sh TITLE SUMMARY.md: writes report/index.html (the summary, escaped, under
# the title) and report/logo.png (the skill's logo, byte for byte). POSIX sh and busybox.
set -eu
usage='usage: make_report.sh TITLE SUMMARY.md'
title=${1:?$usage}
summary=${2:?$usage}
here=$(dirname "$0")
esc() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g'; }
mkdir -p report
cp "$here/../assets/logo.png" report/logo.png
t=$(printf '%s' "$title" | esc)
{
	printf '<!doctype html>\n<html><head><meta charset="utf-8"><title>%s</title></head>\n<body>\n' "$t"
	printf '<img src="logo.png" alt="" width="48" height="48">\n<h1>%s</h1>\n<pre>\n' "$t"
	esc <"$summary"
	printf '</pre>\n</body></html>\n'
} >report/index.html
echo "wrote report/index.html and report/logo.png"
