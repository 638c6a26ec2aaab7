//! Drawing a random workflow ([`Spec`]) from a seed, with a grammar:
//! which steps, branches, parallels and subflows, and how deep.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::workflow::{Grammar, OnTimeout, Spec, Step};

/// Draws a workflow from `seed` with grammar [`Grammar::V1`].
pub fn generate(seed: u64) -> Spec {
    generate_with(seed, Grammar::V1)
}

/// Draws a workflow from `seed`: 1 to 6 steps, branches nested at most
/// twice.
pub fn generate_with(seed: u64, grammar: Grammar) -> Spec {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut next_id = 0usize;
    let n = rng.random_range(0..10);
    let len = rng.random_range(1..=6);
    let steps = (0..len)
        .map(|_| step(&mut rng, &mut next_id, 0, grammar))
        .collect();
    Spec { n, steps, grammar }
}

/// One step drawn with `grammar`. Grammar 1's draws (which arms, which
/// random calls, in which order) must never change: grammar 2 only takes
/// over rolls grammar 1 gives to a parallel or a subflow.
fn step(rng: &mut StdRng, next_id: &mut usize, depth: usize, grammar: Grammar) -> Step {
    *next_id += 1;
    let id = format!("s{next_id}");
    let v2 = grammar.v2();
    let v3 = grammar.v3();
    let roll = rng.random_range(0..100);
    match roll {
        0..15 => Step::Set {
            id,
            value: rng.random_range(0..100),
        },
        15..27 => Step::Code {
            id,
            add: rng.random_range(0..10),
        },
        27..62 => Step::Irq {
            id,
            timeout: match rng.random_range(0..6) {
                0 => Some(OnTimeout::Abort),
                1 => Some(OnTimeout::Skip),
                2 => Some(OnTimeout::Next),
                _ => None,
            },
            catches: rng.random_bool(0.3),
        },
        62..65 if v3 => Step::Block {
            id,
            items: rng.random_range(1..=3),
            parallel: rng.random_bool(0.5),
        },
        68..72 if v2 => Step::Sequence {
            id,
            items: rng.random_range(1..=3),
        },
        62..72 => Step::Parallel {
            id,
            items: rng.random_range(1..=3),
        },
        84..90 if v3 && depth < 2 => {
            let mut branch = |rng: &mut StdRng| {
                (0..rng.random_range(1..=2))
                    .map(|_| step(rng, next_id, depth + 1, grammar))
                    .collect()
            };
            let first = branch(rng);
            let after = branch(rng);
            Step::Needs { id, first, after }
        }
        72..90 if depth < 2 => {
            let mut branch = |rng: &mut StdRng| {
                (0..rng.random_range(1..=2))
                    .map(|_| step(rng, next_id, depth + 1, grammar))
                    .collect()
            };
            let then = branch(rng);
            let otherwise = branch(rng);
            Step::Branches {
                id,
                threshold: rng.random_range(0..10),
                then,
                otherwise,
            }
        }
        72..90 => Step::Set { id, value: 1 },
        94..97 if v2 => Step::Loop {
            id,
            times: rng.random_range(1..=3),
        },
        97.. if v2 && depth == 0 => Step::Jump { id },
        97.. if v2 => Step::Set { id, value: 2 },
        _ => Step::Subflow { id },
    }
}
