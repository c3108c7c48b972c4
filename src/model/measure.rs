//! The one vocabulary of what memtrack measures (#33): each measure's word, and the older words
//! scripts may still give for it. The flags that choose a measure (`report --sort`,
//! `--stacks-by`, `--view`, `diff --view`) take it from here: each of their types keeps a table
//! of the measures it offers (`views::rows::SortKey`, `analyze::stacks::SiteOrder`,
//! `model::profile::View`), the command line parses through that table, and its errors, the
//! --help and the docs name the word. Plain values, in the model the views and the pass read;
//! the JSON keys keep their own names (the schema does not change with a flag's word). Each
//! measure also is one `model::metric::Metric`, which `diff` compares and `check` limits, and
//! through it has its label, unit and JSON key, so those are not kept in lists of their own:
//! `Measure::metric` is written in `model::metric`, since that file reads the metrics whose
//! views read this table.

/// One thing memtrack measures, as a flag chooses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Measure {
    /// Live bytes at the heap peak (of a process, a site, the scope).
    Peak,
    /// Bytes allocated.
    Allocated,
    /// Allocations made.
    Count,
    /// Left live at exit (or definitely lost, by the leak scan).
    Leaked,
    /// Allocations freed by the thread that made them before it allocated anything else.
    Temporary,
    /// Peak resident memory.
    Rss,
}

impl Measure {
    /// Every measure.
    pub const ALL: [Measure; 6] = [
        Measure::Peak,
        Measure::Allocated,
        Measure::Count,
        Measure::Leaked,
        Measure::Temporary,
        Measure::Rss,
    ];

    /// The word every flag, its help and the docs use.
    pub const fn word(self) -> &'static str {
        match self {
            Measure::Peak => "peak",
            Measure::Allocated => "allocated",
            Measure::Count => "count",
            Measure::Leaked => "leaked",
            Measure::Temporary => "temporary",
            Measure::Rss => "rss",
        }
    }

    /// Older words for it that keep working (`--sort bytes` and `--sort allocs` were the only
    /// words of `--sort` for these two), though the help names only [`Measure::word`].
    pub const fn aliases(self) -> &'static [&'static str] {
        match self {
            Measure::Allocated => &["bytes"],
            Measure::Count => &["allocs"],
            _ => &[],
        }
    }

    /// The measure `word` names, by its word or an older one.
    pub fn from_word(word: &str) -> Option<Measure> {
        Measure::ALL
            .into_iter()
            .find(|m| m.word() == word || m.aliases().contains(&word))
    }
}

/// What `word` chooses among the measures of `table`: a flag's table of the measures it offers.
pub fn pick<T: Copy>(table: &[(Measure, T)], word: &str) -> Option<T> {
    let measure = Measure::from_word(word)?;
    table
        .iter()
        .find(|(m, _)| *m == measure)
        .map(|&(_, value)| value)
}

/// The words of `table`'s measures, in its order, for a flag's errors and help.
pub fn words<T>(table: &[(Measure, T)]) -> impl Iterator<Item = &'static str> + '_ {
    table.iter().map(|(m, _)| m.word())
}

/// The word of `value` in `table` (`fallback` if the table lacks it, which a table with every
/// value of its type never does).
pub fn word_of<T: PartialEq>(
    table: &[(Measure, T)],
    value: &T,
    fallback: &'static str,
) -> &'static str {
    table
        .iter()
        .find(|(_, v)| v == value)
        .map_or(fallback, |(m, _)| m.word())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_and_alias_names_one_measure() {
        let mut seen = std::collections::HashSet::new();
        for m in Measure::ALL {
            assert_eq!(Measure::from_word(m.word()), Some(m));
            assert!(seen.insert(m.word()), "{m:?}");
            for alias in m.aliases() {
                assert_eq!(Measure::from_word(alias), Some(m), "{alias}");
                assert!(seen.insert(alias), "{alias}");
            }
        }
        assert_eq!(Measure::from_word("size"), None);
    }

    #[test]
    fn a_table_picks_only_what_it_offers() {
        let table = [(Measure::Peak, 1), (Measure::Count, 2)];
        assert_eq!(pick(&table, "peak"), Some(1));
        assert_eq!(pick(&table, "count"), Some(2));
        assert_eq!(pick(&table, "allocs"), Some(2));
        assert_eq!(pick(&table, "rss"), None);
        assert_eq!(words(&table).collect::<Vec<_>>(), ["peak", "count"]);
        assert_eq!(word_of(&table, &2, "?"), "count");
        assert_eq!(word_of(&table, &3, "?"), "?");
    }
}
