#!/usr/bin/env bash
# Writes Jane Austen's six novels (Debian package r-cran-janeaustenr) as plain UTF-8 text, one
# paragraph a line:  scripts/data/austen.sh OUT_DIR  ->  OUT_DIR/<novel>.txt
# janeaustenr holds one printed line per element with empty strings between paragraphs; the lines
# of a paragraph are joined with single spaces (a line ending in the dash "--" joins the next
# without one; runs of spaces collapse), empty paragraphs are dropped, and headings ("Chapter 1",
# the title page lines) stay lines of their own. A novel whose file exists is not rewritten; each
# file is written to a temporary name and then renamed.
set -euo pipefail
out=${1:?usage: austen.sh OUT_DIR}
novels=(sensesensibility prideprejudice mansfieldpark emma northangerabbey persuasion)
mkdir -p "$out"
todo=()
for n in "${novels[@]}"; do [ -s "$out/$n.txt" ] || todo+=("$n"); done
if [ ${#todo[@]} -eq 0 ]; then exit 0; fi
bash "$(dirname "$0")/../deps.sh" data
Rscript --vanilla - "$out" "$$" "${todo[@]}" <<'RSCRIPT'
args <- commandArgs(trailingOnly = TRUE)
out <- args[1]; pid <- args[2]
suppressPackageStartupMessages(library(janeaustenr))
for (name in args[-(1:2)]) {
  x <- trimws(get(name, envir = asNamespace("janeaustenr")))
  para <- cumsum(x == "")            # a new paragraph starts after every empty line
  keep <- x != ""
  x <- sub("--$", "--\001", x)    # marks a dash at a line end, so no space follows it
  text <- vapply(split(x[keep], para[keep]), paste, "", collapse = " ")
  text <- gsub("\001 ?", "", text)
  text <- trimws(gsub("[[:space:]]+", " ", text))
  text <- text[text != ""]
  tmp <- sprintf("%s/%s.txt.tmp.%s", out, name, pid)
  con <- file(tmp, open = "w", encoding = "UTF-8")
  writeLines(enc2utf8(text), con, useBytes = TRUE)
  close(con)
  if (!file.rename(tmp, sprintf("%s/%s.txt", out, name))) stop("austen.sh: cannot rename ", tmp)
  cat(sprintf("austen: %s.txt %d paragraphs\n", name, length(text)))
}
RSCRIPT
