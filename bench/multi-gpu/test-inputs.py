"""Writes tests/decomposition_mpi.rs's decomposed input for CUDA into directory argv[1]: test-single.toml
(one GPU) and test-split-true.toml / test-split-false.toml (z-slabs, overlapping or not)."""
import sys

src = open("tests/decomposition_mpi.rs").read()
start = src.index('const INPUT: &str = r#"') + len('const INPUT: &str = r#"')
text = src[start : src.index('"#;', start)].replace('backend = "cpu"', 'backend = "cuda"')
open(f"{sys.argv[1]}/test-single.toml", "w").write(text)
for overlap in ("true", "false"):
    split = text.replace("[run]\n", f'[run]\ndecomposition = "z"\nhalo_overlap = {overlap}\n')
    open(f"{sys.argv[1]}/test-split-{overlap}.toml", "w").write(split)
