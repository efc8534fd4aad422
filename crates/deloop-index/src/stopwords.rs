//! English and Spanish function words, left out of lexical queries.
//!
//! A question's function words ("how", "do", "the", "qué", "de", "los") say
//! nothing about where the answer is, but in an OR query each one still adds
//! its BM25 weight. Worse, a Spanish function word is rare in English
//! documentation, so it gets a high IDF and pulls in whatever passage quotes
//! Spanish text. [`is_stopword`] lists the words a query drops (see
//! [`crate::fts_query`]): pronouns, articles, prepositions, conjunctions,
//! question words and auxiliary verbs of both languages, compared without
//! accents (`cómo` = `como`). Words that are also content words in English
//! documents (`os`, `era`) are not listed.
//!
//! ```
//! use deloop_index::is_stopword;
//! assert!(is_stopword("How") && is_stopword("cómo") && is_stopword("the"));
//! assert!(!is_stopword("stream") && !is_stopword("bucle"));
//! ```

/// English function words, lowercase, sorted (a test checks the order).
#[rustfmt::skip]
const ENGLISH: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any",
    "are", "aren", "as", "at", "be", "because", "been", "before", "being", "below", "between",
    "both", "but", "by", "can", "cannot", "could", "couldn", "did", "didn", "do", "does", "doesn",
    "doing", "don", "down", "during", "each", "few", "for", "from", "further", "get", "got", "had",
    "hadn", "has", "hasn", "have", "haven", "having", "he", "her", "here", "hers", "herself",
    "him", "himself", "his", "how", "i", "if", "in", "into", "is", "isn", "it", "its", "itself",
    "just", "may", "me", "might", "more", "most", "must", "my", "myself", "no", "nor", "not", "of",
    "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own",
    "same", "shall", "she", "should", "shouldn", "so", "some", "such", "than", "that", "the",
    "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those",
    "through", "to", "too", "under", "until", "up", "very", "was", "wasn", "we", "were", "weren",
    "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "won",
    "would", "wouldn", "you", "your", "yours", "yourself", "yourselves",
];

/// Spanish function words, lowercase and without accents, sorted.
#[rustfmt::skip]
const SPANISH: &[&str] = &[
    "a", "al", "algo", "algun", "alguna", "algunas", "alguno", "algunos", "ante", "antes", "aqui",
    "cada", "como", "con", "contra", "cual", "cuales", "cualquier", "cuando", "cuanta", "cuantas",
    "cuanto", "cuantos", "de", "del", "desde", "donde", "durante", "e", "el", "ella", "ellas",
    "ello", "ellos", "en", "entre", "es", "esa", "esas", "ese", "eso", "esos", "esta", "estan",
    "estar", "estas", "este", "esto", "estos", "fue", "fueron", "ha", "han", "hasta", "hay", "la",
    "las", "le", "les", "lo", "los", "mas", "me", "mi", "mis", "mucho", "muy", "nada", "ni", "no",
    "nos", "o", "otra", "otras", "otro", "otros", "para", "pero", "poco", "por", "porque", "que",
    "quien", "quienes", "se", "sea", "ser", "si", "sin", "sobre", "son", "su", "sus", "tambien",
    "tan", "te", "todos", "tu", "tus", "u", "un", "una", "unas", "uno", "unos", "y", "ya", "yo",
];

/// True when `word` (any case, with or without accents) is an English or
/// Spanish function word.
pub fn is_stopword(word: &str) -> bool {
    let folded = fold_accents(word);
    ENGLISH.binary_search(&folded.as_str()).is_ok()
        || SPANISH.binary_search(&folded.as_str()).is_ok()
}

/// Lowercase, with the accents of Spanish (and other Latin) vowels and `ü`
/// removed; `ñ` is kept.
///
/// ```
/// assert_eq!(deloop_index::fold_accents("Índice CÓMO ñandú"), "indice como ñandu");
/// ```
pub fn fold_accents(word: &str) -> String {
    word.chars()
        .flat_map(char::to_lowercase)
        .map(|c| match c {
            'á' | 'à' | 'â' | 'ä' | 'ã' => 'a',
            'é' | 'è' | 'ê' | 'ë' => 'e',
            'í' | 'ì' | 'î' | 'ï' => 'i',
            'ó' | 'ò' | 'ô' | 'ö' | 'õ' => 'o',
            'ú' | 'ù' | 'û' | 'ü' => 'u',
            other => other,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_sorted_lowercase_and_unaccented() {
        for list in [ENGLISH, SPANISH] {
            for w in list.windows(2) {
                assert!(w[0] < w[1], "{} before {}", w[0], w[1]);
            }
            for w in list {
                assert_eq!(fold_accents(w), *w);
            }
        }
    }

    #[test]
    fn accents_and_case_are_ignored() {
        assert!(is_stopword("Qué"));
        assert!(is_stopword("CÓMO"));
        assert!(is_stopword("también"));
        assert!(!is_stopword("año"));
        assert!(!is_stopword("os"));
        assert!(!is_stopword(""));
    }
}
