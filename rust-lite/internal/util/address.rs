// SPDX-License-Identifier: GPL-2.0

//! Parsing the cluster manager's address.

/// Parses a dotted-quad IPv4 address such as `10.0.0.1`.
///
/// Exactly four decimal fields of 0 to 255, without leading `+`, spaces or
/// empty fields; leading zeros are accepted (`010` is 10).
pub(crate) fn parse_ipv4(text: &[u8]) -> Option<[u8; 4]> {
    let mut out = [0u8; 4];
    let mut fields = text.split(|&b| b == b'.');
    for slot in out.iter_mut() {
        let field = fields.next()?;
        if field.is_empty() || field.len() > 3 {
            return None;
        }
        let mut value: u32 = 0;
        for &digit in field {
            if !digit.is_ascii_digit() {
                return None;
            }
            // PANIC: at most 3 digits, so `value <= 999`; `digit >= b'0'`
            // as it is an ASCII digit.
            value = value * 10 + u32::from(digit - b'0');
        }
        *slot = u8::try_from(value).ok()?;
    }
    if fields.next().is_some() {
        return None;
    }
    Some(out)
}
