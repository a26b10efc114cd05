//! Decoding arbitrary bytes never panics, and whatever decodes re-encodes to a fixed point.
#![no_main]

use libfuzzer_sys::fuzz_target;
use talosboot_fuzz::{pick, values};

fuzz_target!(|data: &[u8]| {
    let Some((ty, bytes)) = pick(data) else {
        return;
    };
    let Ok(value) = values::from_msgpack(bytes, &ty) else {
        return;
    };
    // Encoding may refuse (NaN), but must not panic.
    let Ok(first) = values::to_msgpack(&value, &ty) else {
        return;
    };
    let again = values::from_msgpack(&first, &ty).expect("re-encoded value decodes");
    let second = values::to_msgpack(&again, &ty).expect("decoded value re-encodes");
    assert_eq!(first, second, "encoding is not a fixed point");
});
