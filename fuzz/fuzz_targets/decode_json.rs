//! Decoding arbitrary bytes never panics, and whatever decodes survives encode + decode unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use talosboot_fuzz::{pick, values};

fuzz_target!(|data: &[u8]| {
    let Some((ty, bytes)) = pick(data) else {
        return;
    };
    let Ok(value) = values::from_json(bytes, &ty) else {
        return;
    };
    let encoded = values::to_json(&value, &ty).expect("a decoded JSON value re-encodes");
    let again = values::from_json(&encoded, &ty).expect("re-encoded JSON decodes");
    assert_eq!(value, again);
});
