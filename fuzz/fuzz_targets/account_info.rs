#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| capi_exporter_fuzz::account_info(data));
