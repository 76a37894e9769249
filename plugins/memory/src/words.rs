//! Significant words: what a message and a memory must share for the memory to be recalled.

use std::collections::BTreeSet;

/// Common words of four letters or more that say nothing about a topic.
const STOPWORDS: &[&str] = &[
    "about", "after", "again", "also", "been", "before", "being", "could", "does", "doing", "from",
    "have", "having", "here", "into", "just", "like", "make", "more", "most", "much", "only",
    "other", "over", "please", "remember", "same", "should", "some", "such", "than", "that",
    "their", "them", "then", "there", "these", "they", "this", "those", "very", "want", "were",
    "what", "when", "where", "which", "while", "will", "with", "would", "your",
];

/// The significant words of `text`: lowercase alphanumeric runs of at least four characters
/// that are not stopwords.
pub fn significant(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().count() >= 4)
        .map(str::to_lowercase)
        .filter(|word| !STOPWORDS.contains(&word.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        significant(text).into_iter().collect()
    }

    #[test]
    fn significant_words_are_lowercase_alphanumeric_runs_of_four_or_more() {
        assert_eq!(
            words("The Rust-lang compiler's 2024 edition, über alles!"),
            vec![
                "2024", "alles", "compiler", "edition", "lang", "rust", "über"
            ]
        );
    }

    #[test]
    fn stopwords_and_short_words_are_not_significant() {
        assert_eq!(
            words("What about that cat of mine? Please remember THIS"),
            vec!["mine"]
        );
        assert_eq!(words(""), Vec::<String>::new());
    }
}
