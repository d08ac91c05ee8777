import Foundation
import StrataEngine

/// The keys of one unique constraint or index that a migration builds:
/// collected in one scan of the records, put into key order, and handed to
/// `WriteTransaction.put(sortedKeys:values:in:)`.
///
/// Rows arrive in ascending order and every element's encoding is
/// prefix-free, so a stable sort by the values alone puts index keys (the
/// values, then the row) into key order, and leaves rows that share
/// values in row order, as a unique constraint's collision report wants.
///
/// A group of one property whose values encode to at most 9 bytes (nil, a
/// Bool, an integer, a Double or Date) keeps each value in its sort entry
/// and stores no bytes; other groups store the values' encodings back to
/// back and sort on their first 16 bytes, comparing whole values only
/// where those tie.
struct IndexKeys {
    let group: KeyGroup
    /// The field and kind of a fixed-width group's property.
    private let field: Int
    private let kind: StoredKind
    /// True for a group of one property of fixed width (see the type's
    /// documentation).
    let fixedWidth: Bool
    /// Fixed width: (code << 56 | word >> 8, word << 56, row). Otherwise:
    /// (the value's first 16 bytes, zero-padded, as two big-endian words,
    /// index into `places`).
    private var entries: [RadixSort.Entry] = []
    /// The values' encodings back to back (groups not of fixed width).
    private var bytes: [UInt8] = []
    /// Each value's place in `bytes`, and its row.
    private var places: [(offset: Int, length: Int, row: Int64)] = []

    init(_ group: KeyGroup, rows: Int) {
        self.group = group
        field = group.properties.first?.field ?? 0
        kind = group.properties.first?.storedKind ?? .opaque
        switch kind {
        case .bool, .signed, .unsigned, .double, .float, .date:
            fixedWidth = group.properties.count == 1 && !(group.properties[0] is Schema.Relationship)
        default: fixedWidth = false
        }
        // Room for every row up front: growing buffers of millions of
        // entries copies them again and again. (Untouched capacity costs
        // address space, not memory.) The count comes from the file: past
        // 16M rows, or 256 MiB of value bytes, the buffers grow as they
        // fill.
        let room = min(max(rows, 0), 1 << 24)
        entries.reserveCapacity(room)
        if !fixedWidth {
            places.reserveCapacity(room)
            bytes.reserveCapacity(min(room * group.properties.count * 24, 1 << 28))
        }
    }

    var count: Int { entries.count }

    /// Adds the key of the record `reader` reads, the record of `row`.
    mutating func add(_ reader: inout _RecordReader, row: Int64) throws {
        if fixedWidth {
            let element = try Self.element(&reader, field: field, kind: kind)
            guard let (code, word, _) = KeyEncoding.fixed(element) else {
                throw SwiftDataError(
                    .corruptRecord,
                    "\(group.entityName).\(group.properties[0].name) of row \(row): \(element) is not of the attribute's type")
            }
            entries.append(RadixSort.Entry(high: UInt64(code) << 56 | word >> 8, low: word << 56, payload: row))
            return
        }
        let start = bytes.count
        for property in group.properties {
            // A to-one is keyed by its target's row (see `KeyGroup.values`).
            let element: KeyEncoding.Element =
                property is Schema.Relationship
                ? try reader.toOneRow(field: property.field).map { .int($0) } ?? .null
                : try Self.element(&reader, field: property.field, kind: property.storedKind)
            KeyEncoding.append(element, to: &bytes)
        }
        let length = bytes.count - start
        try group.checkLength(values: length, row: row)
        let (high, low) = bytes.withUnsafeBytes { raw in
            (Self.word(raw, from: start, 0, length), Self.word(raw, from: start, 8, length))
        }
        entries.append(RadixSort.Entry(high: high, low: low, payload: Int64(places.count)))
        places.append((start, length, row))
    }

    /// Attribute `property` of the record as a key element; values a key
    /// cannot hold read as nil, as in `SaveTransaction`'s keys.
    @inline(__always) private static func element(_ reader: inout _RecordReader, field: Int, kind: StoredKind) throws
        -> KeyEncoding.Element
    {
        if case .scalar(let scalar) = try reader.queryValue(field: field, kind: kind) {
            return scalar
        }
        return .null
    }

    /// Bytes `start + from ..< start + from + 8` of a value of `length`
    /// bytes as a big-endian word, zero-padded past the value's end.
    private static func word(_ raw: UnsafeRawBufferPointer, from start: Int, _ from: Int, _ length: Int) -> UInt64 {
        if length >= from + 8 {
            return UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: start + from, as: UInt64.self))
        }
        var word: UInt64 = 0
        for i in from..<max(from, length) { word |= UInt64(raw[start + i]) << (56 - 8 * (i - from)) }
        return word
    }

    /// Puts the keys into key order (rows with equal values in row order).
    mutating func sort() {
        RadixSort.sort(&entries)
        guard !fixedWidth else { return }
        // Values that tie on their first 16 bytes are equal when neither is
        // longer (the encoding is prefix-free); longer ones are compared
        // whole.
        let places = places
        bytes.withUnsafeBytes { raw in
            let base = raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1).unsafelyUnwrapped
            entries.withUnsafeMutableBufferPointer { entries in
                var start = 0
                while start < entries.count {
                    var end = start + 1
                    var long = places[Int(entries[start].payload)].length > 16
                    while end < entries.count, entries[end].high == entries[start].high, entries[end].low == entries[start].low {
                        long = long || places[Int(entries[end].payload)].length > 16
                        end += 1
                    }
                    if long {
                        entries[start..<end].sort { x, y in
                            let a = places[Int(x.payload)]
                            let b = places[Int(y.payload)]
                            let c = memcmp(base + a.offset, base + b.offset, min(a.length, b.length))
                            if c != 0 { return c < 0 }
                            if a.length != b.length { return a.length < b.length }
                            return x.payload < y.payload
                        }
                    }
                    start = end
                }
            }
        }
    }

    /// The row of the key at `index` (after `sort()`).
    func row(_ index: Int) -> Int64 { row(of: entries[index]) }

    private func row(of entry: RadixSort.Entry) -> Int64 {
        fixedWidth ? entry.payload : places[Int(entry.payload)].row
    }

    /// The values of the key at `index`, encoded.
    func value(_ index: Int) -> [UInt8] {
        let entry = entries[index]
        let length = valueLength(entry)
        return bytes.withUnsafeBytes { raw in
            [UInt8](unsafeUninitializedCapacity: length) { buffer, initialized in
                if let target = buffer.baseAddress { writeValue(entry, raw, to: UnsafeMutableRawPointer(target)) }
                initialized = length
            }
        }
    }

    /// Whether the keys at `index` and `index - 1` hold equal values.
    func sharesValues(_ index: Int) -> Bool {
        let (a, b) = (entries[index - 1], entries[index])
        guard a.high == b.high, a.low == b.low else { return false }
        if fixedWidth { return true }
        let (x, y) = (places[Int(a.payload)], places[Int(b.payload)])
        return x.length == y.length && bytes[x.offset..<(x.offset + x.length)] == bytes[y.offset..<(y.offset + y.length)]
    }

    /// The type code and word of a fixed-width entry's value.
    @inline(__always) private static func fixed(_ entry: RadixSort.Entry) -> (code: UInt8, word: UInt64) {
        (UInt8(truncatingIfNeeded: entry.high >> 56), entry.high << 8 | entry.low >> 56)
    }

    /// The encoded length of `entry`'s values.
    @inline(__always) private func valueLength(_ entry: RadixSort.Entry) -> Int {
        if fixedWidth {
            let (code, word) = Self.fixed(entry)
            return KeyEncoding.count(code: code, word: word)
        }
        return places[Int(entry.payload)].length
    }

    /// Writes `entry`'s encoded values (``valueLength(_:)`` bytes) at
    /// `target`; `raw` is `bytes`.
    @inline(__always) private func writeValue(
        _ entry: RadixSort.Entry, _ raw: UnsafeRawBufferPointer, to target: UnsafeMutableRawPointer
    ) {
        if fixedWidth {
            let (code, word) = Self.fixed(entry)
            KeyEncoding.store(code: code, word: word, at: target)
        } else {
            let place = places[Int(entry.payload)]
            if let base = raw.baseAddress { target.copyMemory(from: base + place.offset, byteCount: place.length) }
        }
    }

    /// Calls `body` with the keys in their order (the values, then for an
    /// index the row), a batch of up to `batchSize` at a time, and the
    /// index of each batch's first key. One batch's buffers serve them
    /// all: they stay in the cache, and a million keys do not need tens
    /// of megabytes of fresh memory.
    func forEachBatch(_ batchSize: Int = 16_384, _ body: (KeyBatch, Int) throws -> Void) throws {
        // An index key ends with its row (see `KeyGroup.storeRow`).
        let index = group.kind == .index
        let typical = fixedWidth ? KeyEncoding.maxFixedCount : bytes.count / max(entries.count, 1)
        var batch = KeyBatch(capacity: batchSize, bytes: typical + (index ? 5 : 0))
        var start = 0
        while start < entries.count {
            let end = min(entries.count, start + batchSize)
            batch.removeAll()
            bytes.withUnsafeBytes { raw in
                for entry in entries[start..<end] {
                    let length = valueLength(entry)
                    let row = row(of: entry)
                    let suffix = index ? KeyGroup.rowSuffixLength(row) : 0
                    batch.append(count: length + suffix) { target in
                        guard let target = target.baseAddress else { return }
                        writeValue(entry, raw, to: target)
                        if index { KeyGroup.storeRow(row, at: target + length) }
                    }
                }
            }
            try body(batch, start)
            start = end
        }
    }
}

/// A stable sort of (high, low, payload) entries by (high, low) as one
/// unsigned 128-bit number, by bytes: a million index keys sort in a few
/// passes over memory, where a comparison sort makes twenty comparisons per
/// key. A large range first goes into buckets by its most significant byte
/// that differs (one pass over memory); a range small enough for the cache
/// then takes a counting pass per byte that differs, least significant
/// first. A byte every entry of a range shares costs no pass.
enum RadixSort {
    struct Entry {
        var high: UInt64
        var low: UInt64
        var payload: Int64
    }

    /// Ranges up to this many entries (1.5 MiB) sort byte by byte from the
    /// least significant; larger ones are split into buckets first.
    static let cacheEntries = 65_536

    static func sort(_ entries: inout [Entry]) {
        let count = entries.count
        guard count > 1 else { return }
        var scratch = [Entry](unsafeUninitializedCapacity: count) { _, initialized in initialized = count }
        entries.withUnsafeMutableBufferPointer { a in
            scratch.withUnsafeMutableBufferPointer { b in
                sort(a.baseAddress.unsafelyUnwrapped, room: b.baseAddress.unsafelyUnwrapped, count: count)
            }
        }
    }

    /// Sorts the `count` entries at `a`, with as many at `room` to use.
    private static func sort(_ a: UnsafeMutablePointer<Entry>, room b: UnsafeMutablePointer<Entry>, count: Int) {
        if count <= 24 {
            insertionSort(a, count: count)
            return
        }
        let digits = differingDigits(a, count: count)
        guard let top = digits.last else { return }
        if count <= cacheEntries || digits.count == 1 {
            var inRoom = false
            for digit in digits {
                let (from, to) = inRoom ? (b, a) : (a, b)
                scatter(from, to, count: count, digit: digit)
                inRoom.toggle()
            }
            if inRoom { a.update(from: b, count: count) }
            return
        }
        let starts = scatter(a, b, count: count, digit: top)
        for value in 0..<256 {
            let start = starts[value]
            let end = value == 255 ? count : starts[value + 1]
            guard end > start else { continue }
            sort(b + start, room: a + start, count: end - start)
            (a + start).update(from: b + start, count: end - start)
        }
    }

    /// Moves the entries at `from` to `to`, stably ordered by byte `digit`
    /// (0..<8: the low word's bytes, 8..<16: the high word's); returns
    /// where each byte value's entries start.
    @discardableResult
    private static func scatter(
        _ from: UnsafeMutablePointer<Entry>, _ to: UnsafeMutablePointer<Entry>, count: Int, digit: Int
    ) -> [Int] {
        var counts = [Int](repeating: 0, count: 256)
        counts.withUnsafeMutableBufferPointer { counts in
            for i in 0..<count { counts[byte(from[i], digit)] += 1 }
            var running = 0
            for value in 0..<256 {
                let n = counts[value]
                counts[value] = running
                running += n
            }
        }
        let starts = counts
        counts.withUnsafeMutableBufferPointer { next in
            for i in 0..<count {
                let value = byte(from[i], digit)
                to[next[value]] = from[i]
                next[value] += 1
            }
        }
        return starts
    }

    /// The bytes (as `scatter`'s digits, ascending) in which some of the
    /// `count` entries at `a` differ.
    private static func differingDigits(_ a: UnsafeMutablePointer<Entry>, count: Int) -> [Int] {
        var (orHigh, andHigh, orLow, andLow): (UInt64, UInt64, UInt64, UInt64) = (0, .max, 0, .max)
        for i in 0..<count {
            orHigh |= a[i].high
            andHigh &= a[i].high
            orLow |= a[i].low
            andLow &= a[i].low
        }
        return (0..<16).filter { digit in
            let differing = digit < 8 ? orLow ^ andLow : orHigh ^ andHigh
            return (differing >> UInt64(8 * (digit & 7))) & 0xFF != 0
        }
    }

    private static func insertionSort(_ a: UnsafeMutablePointer<Entry>, count: Int) {
        guard count > 1 else { return }
        for i in 1..<count {
            let entry = a[i]
            var j = i
            while j > 0, (a[j - 1].high, a[j - 1].low) > (entry.high, entry.low) {
                a[j] = a[j - 1]
                j -= 1
            }
            a[j] = entry
        }
    }

    @inline(__always) private static func byte(_ entry: Entry, _ digit: Int) -> Int {
        let word = digit < 8 ? entry.low : entry.high
        return Int(truncatingIfNeeded: (word >> UInt64(8 * (digit & 7))) & 0xFF)
    }
}
