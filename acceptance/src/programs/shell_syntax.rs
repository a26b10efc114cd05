//! The sim shell's syntax: splitting a script into words and operators (quotes, `\` escapes,
//! comments, `;`/newline, `&&`, `||`, `|`) and expanding `$VAR`, `${VAR}` and `$?` in a word.
//! No redirections, subshells, globbing or here-documents: such characters stay in words.

use std::collections::BTreeMap;

/// A word or an operator of a script.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Token {
    Word(String),
    /// `;` or a newline.
    Seq,
    And,
    Or,
    /// A single `|`: the previous command's stdout is the next one's stdin.
    Pipe,
}

/// Marks a single-quoted `$` so that [`expand`] leaves it literal.
const LITERAL_DOLLAR: char = '\u{2}';

pub(super) fn tokenize(script: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = script.chars().peekable();
    let mut quote: Option<char> = None;
    let flush = |cur: &mut String, in_word: &mut bool, out: &mut Vec<Token>| {
        if *in_word {
            out.push(Token::Word(std::mem::take(cur)));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('\''), c) => cur.push(if c == '$' { LITERAL_DOLLAR } else { c }),
            (Some(_), '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                    in_word = true;
                }
            }
            (None, '#') if !in_word => {
                while chars.peek().is_some_and(|c| *c != '\n') {
                    chars.next();
                }
            }
            (None, ' ' | '\t') => flush(&mut cur, &mut in_word, &mut out),
            (None, ';' | '\n') => {
                flush(&mut cur, &mut in_word, &mut out);
                out.push(Token::Seq);
            }
            (None, '&') if chars.peek() == Some(&'&') => {
                chars.next();
                flush(&mut cur, &mut in_word, &mut out);
                out.push(Token::And);
            }
            (None, '|') => {
                flush(&mut cur, &mut in_word, &mut out);
                if chars.peek() == Some(&'|') {
                    chars.next();
                    out.push(Token::Or);
                } else {
                    out.push(Token::Pipe);
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    flush(&mut cur, &mut in_word, &mut out);
    out
}

/// Expands `$VAR`, `${VAR}` and `$?` (`status`); a single-quoted `$` stays literal.
pub(super) fn expand(word: &str, env: &BTreeMap<String, String>, status: i32) -> String {
    let mut out = String::new();
    let mut chars = word.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(if c == LITERAL_DOLLAR { '$' } else { c });
            continue;
        }
        let name: String = match chars.peek() {
            Some('{') => {
                chars.next();
                chars.by_ref().take_while(|c| *c != '}').collect()
            }
            Some('?') => {
                chars.next();
                out.push_str(&status.to_string());
                continue;
            }
            _ => {
                let mut n = String::new();
                while let Some(c) = chars
                    .peek()
                    .filter(|c| c.is_ascii_alphanumeric() || **c == '_')
                {
                    n.push(*c);
                    chars.next();
                }
                n
            }
        };
        if name.is_empty() {
            out.push('$');
        } else {
            out.push_str(env.get(&name).map(String::as_str).unwrap_or(""));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(s: &str) -> Token {
        Token::Word(s.into())
    }

    #[test]
    fn tokenizes_like_sh() {
        let t = tokenize("echo 'a b' \"$X\"; exit 3 && x # c");
        assert_eq!(t[0], word("echo"));
        assert_eq!(t[1], word("a b"));
        assert_eq!(t[2], word("$X"));
        assert_eq!(t[3], Token::Seq);
        assert_eq!(t.len(), 8);
        let env = BTreeMap::from([("X".to_string(), "1".to_string())]);
        assert_eq!(expand("$X-${X}-$?-\u{2}X", &env, 2), "1-1-2-$X");
    }

    #[test]
    fn a_single_bar_is_a_pipe_and_a_double_one_is_or() {
        assert_eq!(
            tokenize("a|b || c | d"),
            [
                word("a"),
                Token::Pipe,
                word("b"),
                Token::Or,
                word("c"),
                Token::Pipe,
                word("d")
            ]
        );
        // Quoted bars are part of a word, as in the render Job's sed script.
        assert_eq!(
            tokenize("sed -n -E '/^(---|kind:)/p'"),
            [word("sed"), word("-n"), word("-E"), word("/^(---|kind:)/p")]
        );
    }

    #[test]
    fn single_quotes_with_an_embedded_quote_make_one_word() {
        // The provider quotes `it's` as 'it'\''s'.
        assert_eq!(tokenize(r"echo 'it'\''s'"), [word("echo"), word("it's")]);
    }
}
