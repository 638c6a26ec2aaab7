//! # acts-cli: the `acts` command-line tool
//!
//! Will run, deploy, start, inspect and act on workflows against any store
//! (`acts run MODEL.yml`, `acts resume`, ...). It depends on the `acts`
//! facade only.
//!
//! **Status:** not built yet. The binary says so and exits with status 2
//! rather than pretending to work.

fn main() {
    eprintln!(
        "acts: the command-line tool is not built yet (it needs the engine); \
         see README.md for what works today"
    );
    std::process::exit(2);
}
