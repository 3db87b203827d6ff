import Testing

@testable import Ledger

@Suite("Key encoding")
struct KeyEncodingTests {
    let uuid: [UInt8] = Array(0xA0...0xAF)

    @Test("keys built inline have the documented layouts: big-endian codes and sequences, times with the sign bit flipped")
    func layouts() {
        #expect(
            StartIndexRow.key(type: 0x0102_0304, source: nil, start: -1, uuid: uuid).bytes
                == [1, 2, 3, 4, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF] + uuid)
        #expect(EndIndexRow.key(type: 7, end: 0, uuid: []).bytes == [0, 0, 0, 7, 0x80, 0, 0, 0, 0, 0, 0, 0])
        #expect(
            StartIndexRow.key(type: 1, source: 0x0A0B_0C0D, start: 0x0102, uuid: uuid).bytes
                == [0, 0, 0, 1, 0x0A, 0x0B, 0x0C, 0x0D, 0x80, 0, 0, 0, 0, 0, 0x01, 0x02] + uuid)
        #expect(ChangeIndexRow.key(type: 2, source: 3, sequence: 0x0102_0304_0506_0708).bytes == [0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6, 7, 8])
        #expect(ChangeIndexRow.value(ChangeIndexRow.removed, uuid: uuid).bytes == [2] + uuid)
        #expect(StoredObject(sequence: 5, type: 6, source: 7).encoded.bytes == [0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 7])
    }

    @Test("inline keys sort as their times and sequences do")
    func order() {
        let times: [Int64] = [.min, -86_400_000_000, -1, 0, 1, 1_700_000_000_000_000, .max]
        let keys = times.map { StartIndexRow.key(type: 9, source: nil, start: $0, uuid: uuid).bytes }
        #expect(keys == keys.sorted { $0.lexicographicallyPrecedes($1) })
    }

    @Test("keys order as LMDB orders them: bytewise, a prefix first; inline keys by their first sixteen bytes too")
    func lmdbOrder() {
        // Past sixteen bytes too, where inline keys leave their leading words for all the bytes.
        let long = Array(repeating: UInt8(7), count: 16)
        let keys: [[UInt8]] = [
            [], [0], [0, 0], [0, 1], [0, 0xFF], [1], [1, 0], long, long + [0], long + [0, 5], long + [1], long + [1, 0],
            [7, 8], [0x7F, 0xFF, 0xFF], [0x80], [0xFF], [0xFF, 0],
        ]
        for (i, first) in keys.enumerated() {
            for (j, second) in keys.enumerated() {
                let precedes = first.withUnsafeBytes { a in second.withUnsafeBytes { b in KeyEncoding.precedes(a, b) } }
                #expect(precedes == (i < j), "\(first) before \(second)")
                var (inlineFirst, inlineSecond) = (InlineBytes(), InlineBytes())
                inlineFirst.append(first)
                inlineSecond.append(second)
                #expect(inlineFirst.precedes(inlineSecond) == (i < j))
            }
        }
        // The leading words order keys that differ in their first sixteen bytes.
        let start = StartIndexRow.key(type: 3, source: nil, start: 10, uuid: uuid)
        let later = StartIndexRow.key(type: 3, source: nil, start: 11, uuid: uuid)
        let otherType = StartIndexRow.key(type: 2, source: nil, start: 99, uuid: uuid)
        #expect(start.leadingWords < later.leadingWords)
        #expect(otherType.leadingWords < start.leadingWords)
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
        let key = ChangeIndexRow.key(type: 1, source: 0, sequence: 2)
        key.bytes.withUnsafeBytes { #expect(key.equals($0)) }
        (key.bytes + [0]).withUnsafeBytes { #expect(!key.equals($0)) }
        ChangeIndexRow.key(type: 1, source: 0, sequence: 3).bytes.withUnsafeBytes { #expect(!key.equals($0)) }
    }

    @Test("a row written by its builders reads back field by field, in by_start, by_source and by_end")
    func timeRows() throws {
        let (type, source, start, end, sequence, value) = (UInt32(3), UInt32(0x0A0B_0C0D), Int64(-5_000_000), Int64(7_000_000), UInt64(42), 71.25)
        for (bySource, cipher, series) in [
            (false, nil, false), (true, nil, true), (false, LedgerCipher.generate(), true), (true, LedgerCipher.generate(), false),
        ] {
            let key = StartIndexRow.key(type: type, source: bySource ? source : nil, start: start, uuid: uuid).bytes
            let valueBits = LedgerCipher.masked(value.bitPattern, sequence: sequence, by: cipher)
            // Encrypted, the stored bits are not the value's.
            #expect((valueBits == value.bitPattern) == (cipher == nil))
            let rowValue = StartIndexRow.value(end: end, sequence: sequence, valueBits: valueBits, source: bySource ? nil : source, series: series).bytes
            #expect(key.count == StartIndexRow.keyLength(bySource: bySource))
            #expect(rowValue.count == StartIndexRow.valueLength(bySource: bySource))
            try key.withUnsafeBytes { key in
                try rowValue.withUnsafeBytes { rowValue in
                    let row = try #require(try StartIndexRow((key, rowValue), type: type, source: bySource ? source : nil, cipher: cipher))
                    // The series flag rides on the sequence's top bit and leaves the sequence (and the value's pad) as it was.
                    #expect(row.startUs == start && row.endUs == end && row.sequence == sequence && row.value == value)
                    #expect(row.isSeries == series && row.entry(uuid: false).isSeries == series)
                    #expect(row.source == source && row.uuid == uuid)
                    #expect(row.entry(uuid: false).uuid.isEmpty && row.entry(uuid: true).uuid == uuid)
                    // Another type's row ends a scan; a damaged value is an error, not a row.
                    #expect(try StartIndexRow((key, rowValue), type: type + 1, source: bySource ? source : nil, cipher: cipher) == nil)
                    #expect(throws: LedgerFailure.self) { try StartIndexRow((key, UnsafeRawBufferPointer(rebasing: rowValue.dropLast())), type: type, source: bySource ? source : nil, cipher: cipher) }
                }
            }
        }
        let key = EndIndexRow.key(type: type, end: end, uuid: uuid).bytes
        let rowValue = EndIndexRow.value(start: start, sequence: sequence, source: source, series: true).bytes
        try key.withUnsafeBytes { key in
            try rowValue.withUnsafeBytes { rowValue in
                let row = try #require(try EndIndexRow((key, rowValue), type: type))
                #expect(row.startUs == start && row.endUs == end && row.sequence == sequence && row.source == source && row.uuid == uuid)
                #expect(row.entry.value.isNaN && row.entry.isSeries)
                #expect(try EndIndexRow((key, rowValue), type: type + 1) == nil)
            }
        }
    }

    @Test("a change row reads back its sequence, whether it was a save, and its position")
    func changeRows() throws {
        for (source, op) in [(UInt32(1), ChangeIndexRow.added), (UInt32(9), ChangeIndexRow.removed)] {
            let key = ChangeIndexRow.key(type: 4, source: source, sequence: 77).bytes
            let rowValue = ChangeIndexRow.value(op, uuid: uuid).bytes
            try key.withUnsafeBytes { key in
                try rowValue.withUnsafeBytes { rowValue in
                    let row = try #require(try ChangeIndexRow((key, rowValue), prefix: ChangeIndexRow.prefix(type: 4, source: source)))
                    #expect(row.sequence == 77 && row.wasAdded == (op == ChangeIndexRow.added))
                    #expect(row.position == ChangePosition(sequence: 77, uuid: uuid))
                    #expect(try ChangeIndexRow((key, rowValue), prefix: ChangeIndexRow.prefix(type: 5, source: source)) == nil)
                }
            }
        }
    }
}
