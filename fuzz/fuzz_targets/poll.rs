#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| capi_exporter_fuzz::poll(data));
