//! `acts token`: make an access token for `acts serve` and the config
//! entry that holds its hash; hash a token read from stdin.

use std::io::Read;

use acts_server::{TokenConfig, hash_token};

use crate::cli::TokenCommand;
use crate::failure::Failure;

/// How long a new token is: 43 characters of a 64-letter alphabet (over
/// 256 random bits).
const TOKEN_LEN: usize = 43;

/// Runs `acts token ...`; returns the exit code.
pub(crate) fn run(command: TokenCommand) -> Result<u8, Failure> {
    match command {
        TokenCommand::New { principal, roles } => {
            if principal.trim().is_empty() {
                return Err(Failure::input("--principal must not be empty"));
            }
            let token = nanoid::nanoid!(TOKEN_LEN);
            let entry = TokenConfig {
                principal,
                roles,
                sha256: hash_token(&token),
            };
            let yaml = serde_norway::to_string(&vec![entry])
                .map_err(|e| Failure::run(format!("cannot write the config entry: {e}")))?;
            println!("token: {token}");
            println!("# Give the token to its holder (it is shown only now). Add this under");
            println!("# `tokens:` in the config of `acts serve --config FILE` (or ACTS_TOKENS):");
            print!("{yaml}");
            Ok(0)
        }
        TokenCommand::Hash => {
            let mut token = String::new();
            std::io::stdin()
                .read_to_string(&mut token)
                .map_err(|e| Failure::input(format!("cannot read the token from stdin: {e}")))?;
            let token = token.trim();
            if token.is_empty() {
                return Err(Failure::input(
                    "no token on stdin (e.g. `printf %s \"$TOKEN\" | acts token hash`)",
                ));
            }
            println!("{}", hash_token(token));
            Ok(0)
        }
    }
}
