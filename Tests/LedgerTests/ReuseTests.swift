import LedgerSchema
import Testing

@Suite("Values reused by their bytes")
struct ReuseTests {
    /// `reuse`'s value for `key`, and whether it was made for this call.
    private func value(_ reuse: inout Reuse<String>, _ key: String) -> (value: String, made: Bool) {
        var made = false
        let value = Array(key.utf8).withUnsafeBytes { raw in
            reuse.value(for: raw) { bytes in
                made = true
                return "value of " + String(decoding: bytes, as: UTF8.self)
            }
        }
        return (value, made)
    }

    @Test("the latest eight keys are answered without making their values again, each with its own, the oldest replaced first")
    func latestEight() {
        var reuse = Reuse<String>()
        // Same lengths, different bytes, and the empty key.
        let keys = ["", "aa", "ab", "ba", "bb", "abc", "abd", "x"]
        for key in keys { #expect(value(&reuse, key) == ("value of " + key, true)) }
        for _ in 0..<3 {
            for key in keys.shuffled() { #expect(value(&reuse, key) == ("value of " + key, false), "\(key)") }
        }
        // A ninth key takes the oldest slot (""); the next one the second oldest ("aa").
        #expect(value(&reuse, "ninth") == ("value of ninth", true))
        #expect(value(&reuse, "").made)
        for key in keys.dropFirst(2) { #expect(value(&reuse, key) == ("value of " + key, false), "\(key)") }
        #expect(value(&reuse, "aa").made)
    }

    @Test("a value that fails to be made is not kept")
    func failedMake() throws {
        struct Refused: Error {}
        var reuse = Reuse<Int>()
        let bytes: [UInt8] = [1, 2, 3]
        #expect(throws: Refused.self) { try bytes.withUnsafeBytes { raw in try reuse.value(for: raw) { _ in throw Refused() } } }
        var calls = 0
        for _ in 0..<2 {
            let value = bytes.withUnsafeBytes { raw in
                reuse.value(for: raw) { _ in
                    calls += 1
                    return 7
                }
            }
            #expect(value == 7)
        }
        #expect(calls == 1)
    }
}
