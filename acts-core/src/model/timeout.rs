//! [`TimeoutLimit`]: the `30s`, `5m`, `2h`, `1d` literals of `$cost_in` and
//! timeout rules.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The unit of a [`TimeoutLimit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    /// Seconds (`s`).
    Second,
    /// Minutes (`m`).
    Minute,
    /// Hours (`h`).
    Hour,
    /// Days (`d`).
    Day,
}

impl TimeUnit {
    fn secs(self) -> u64 {
        match self {
            TimeUnit::Second => 1,
            TimeUnit::Minute => 60,
            TimeUnit::Hour => 3600,
            TimeUnit::Day => 86_400,
        }
    }

    fn suffix(self) -> char {
        match self {
            TimeUnit::Second => 's',
            TimeUnit::Minute => 'm',
            TimeUnit::Hour => 'h',
            TimeUnit::Day => 'd',
        }
    }
}

/// A duration written as `<whole number><unit>`, unit one of `s m h d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutLimit {
    /// The number.
    pub value: u64,
    /// The unit.
    pub unit: TimeUnit,
}

impl TimeoutLimit {
    /// The limit as a duration.
    pub fn as_duration(&self) -> Duration {
        Duration::from_secs(self.value.saturating_mul(self.unit.secs()))
    }
}

impl fmt::Display for TimeoutLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.value, self.unit.suffix())
    }
}

impl FromStr for TimeoutLimit {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let bad = || {
            format!(
                "'{s}' is not a duration: write a whole number and a unit s, m, h or d (e.g. 30s, 5m, 2h, 1d)"
            )
        };
        let unit = match t.chars().last() {
            Some('s') => TimeUnit::Second,
            Some('m') => TimeUnit::Minute,
            Some('h') => TimeUnit::Hour,
            Some('d') => TimeUnit::Day,
            _ => return Err(bad()),
        };
        let number = &t[..t.len() - 1];
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let value = number.parse().map_err(|_| bad())?;
        Ok(Self { value, unit })
    }
}

/// The string literals passed to `$cost_in(...)` calls in a script, in order
/// (e.g. `["1h", "2h"]` for `$cost_in("1h", '2h')`). Non-literal arguments
/// are not returned.
pub fn cost_in_literals(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = script;
    while let Some(pos) = rest.find("$cost_in(") {
        rest = &rest[pos + "$cost_in(".len()..];
        let args_end = rest.find(')').unwrap_or(rest.len());
        for arg in rest[..args_end].split(',') {
            let arg = arg.trim();
            let quoted = arg.len() >= 2
                && ((arg.starts_with('"') && arg.ends_with('"'))
                    || (arg.starts_with('\'') && arg.ends_with('\'')));
            if quoted {
                out.push(arg[1..arg.len() - 1].to_owned());
            }
        }
        rest = &rest[args_end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit_and_rejects_the_rest() {
        let secs = |s: &str| s.parse::<TimeoutLimit>().map(|t| t.as_duration().as_secs());
        assert_eq!(secs("10s"), Ok(10));
        assert_eq!(secs("30m"), Ok(1800));
        assert_eq!(secs("2h"), Ok(7200));
        assert_eq!(secs("1d"), Ok(86_400));
        for bad in ["", "h", "10", "1.5h", "-1h", "1w", "ten s", "1 h"] {
            assert!(
                bad.parse::<TimeoutLimit>().is_err(),
                "{bad:?} must not parse"
            );
        }
        assert_eq!("2h".parse::<TimeoutLimit>().unwrap().to_string(), "2h");
    }

    #[test]
    fn finds_cost_in_literals() {
        assert_eq!(
            cost_in_literals(r#"$cost_in("1h") && $cost_in('2x', "3d")"#),
            vec!["1h", "2x", "3d"]
        );
        assert!(cost_in_literals("a > 1").is_empty());
        assert!(cost_in_literals("$cost_in(limit)").is_empty());
    }
}
