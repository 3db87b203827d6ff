import Testing

@testable import Ledger

@Suite("Key encoding")
struct KeyEncodingTests {
    let uuid: [UInt8] = Array(0xA0...0xAF)

    @Test("keys built inline have the documented layouts: big-endian codes and sequences, times with the sign bit flipped")
    func layouts() {
        #expect(KeyEncoding.timeKey(type: 0x0102_0304, time: -1, uuid: uuid).bytes == [1, 2, 3, 4, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF] + uuid)
        #expect(KeyEncoding.timeKey(type: 7, time: 0, uuid: []).bytes == [0, 0, 0, 7, 0x80, 0, 0, 0, 0, 0, 0, 0])
        #expect(
            KeyEncoding.sourceTimeKey(type: 1, source: 0x0A0B_0C0D, time: 0x0102, uuid: uuid).bytes
                == [0, 0, 0, 1, 0x0A, 0x0B, 0x0C, 0x0D, 0x80, 0, 0, 0, 0, 0, 0x01, 0x02] + uuid)
        #expect(KeyEncoding.changeKey(type: 2, sequence: 0x0102_0304_0506_0708).bytes == [0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8])
        #expect(KeyEncoding.sourceChangeKey(type: 2, source: 3, sequence: 9).bytes == [0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 9])
        #expect(KeyEncoding.changeValue(Projector.removed, uuid: uuid).bytes == [2] + uuid)
        #expect(StoredObject(sequence: 5, type: 6, source: 7).encoded.bytes == [0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 7])
    }

    @Test("inline keys sort as their times and sequences do")
    func order() {
        let times: [Int64] = [.min, -86_400_000_000, -1, 0, 1, 1_700_000_000_000_000, .max]
        let keys = times.map { KeyEncoding.timeKey(type: 9, time: $0, uuid: uuid).bytes }
        #expect(keys == keys.sorted { $0.lexicographicallyPrecedes($1) })
    }

    @Test("an inline key compares equal only to its own bytes, and holds up to 64 bytes")
    func equality() {
        var bytes = InlineBytes()
        bytes.append(uuid)
        bytes.append(uuid)
        bytes.append(uuid)
        bytes.append(uuid)
        #expect(bytes.count == 64)
        #expect(bytes.bytes == uuid + uuid + uuid + uuid)
        let key = KeyEncoding.changeKey(type: 1, sequence: 2)
        key.bytes.withUnsafeBytes { #expect(key.equals($0)) }
        (key.bytes + [0]).withUnsafeBytes { #expect(!key.equals($0)) }
        KeyEncoding.changeKey(type: 1, sequence: 3).bytes.withUnsafeBytes { #expect(!key.equals($0)) }
    }
}
