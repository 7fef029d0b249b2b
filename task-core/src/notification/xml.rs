//! Escaping of text interpolated into a notification envelope.

/// Whether XML 1.0 allows `c` in a document (`Char` production of the XML 1.0 spec).
pub(crate) fn is_xml_char(c: char) -> bool {
    matches!(c,
        '\u{9}' | '\u{A}' | '\u{D}'
        | '\u{20}'..='\u{D7FF}'
        | '\u{E000}'..='\u{FFFD}'
        | '\u{10000}'..='\u{10FFFF}')
}

/// `text` without the characters XML 1.0 forbids (controls other than tab, newline and
/// carriage return; U+FFFE and U+FFFF). This is what a field reads as after a parser
/// unescapes it.
pub fn sanitize(text: &str) -> String {
    text.chars().filter(|&c| is_xml_char(c)).collect()
}

/// Appends `text` to `out`, sanitized and escaped for XML character data.
///
/// `&`, `<` and `>` become entities, so nothing in `text` can open or close an element or end
/// a CDATA section (`]]>`); a carriage return becomes `&#13;` so parsers do not fold it into a
/// newline. Quotes are left alone: they are plain text outside attributes, and the reference's
/// envelopes show them raw (`Background command "build" completed`).
pub(crate) fn push_escaped(out: &mut String, text: &str) {
    for c in text.chars().filter(|&c| is_xml_char(c)) {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\r' => out.push_str("&#13;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(text: &str) -> String {
        let mut out = String::new();
        push_escaped(&mut out, text);
        out
    }

    #[test]
    fn markup_is_escaped_and_quotes_are_kept() {
        assert_eq!(
            escaped(r#"</task-notification> & "q" ]]>"#),
            r#"&lt;/task-notification&gt; &amp; "q" ]]&gt;"#
        );
    }

    #[test]
    fn forbidden_characters_are_dropped() {
        assert_eq!(
            escaped("a\u{0}b\u{1b}c\u{FFFE}d\u{FFFF}e\tf\ng"),
            "abcde\tf\ng"
        );
        assert_eq!(sanitize("x\u{7}y\r"), "xy\r");
        assert_eq!(escaped("\r\n"), "&#13;\n");
    }
}
