/// A context's identity map for one entity: row id → registered model.
///
/// An open-addressing table with linear probing. Key 0 marks an empty slot
/// and `Int64.min` a removed one (a tombstone: removal cannot shift later
/// entries back cheaply, because consecutive rows form one long probe run);
/// rows 0 and `Int64.min`, which the store never allocates, live in a side
/// table so the map is total. The table is rebuilt when live entries plus
/// tombstones pass three quarters of it. It exists because every fetched
/// row is registered: the standard `Dictionary` hashes each `Int64` with
/// SipHash and scatters consecutive rows over the table, which cost more
/// than decoding a small record. Row ids are not attacker-chosen hash keys
/// (the store allocates them in sequence), so a cheap hash that keeps order
/// is enough.
struct RowMap {
    private static let empty: Int64 = 0
    private static let removed = Int64.min

    private var keys: [Int64]
    private var values: [(any PersistentModel)?]
    /// Rows 0 and `Int64.min`.
    private var special: [Int64: any PersistentModel] = [:]
    private(set) var count = 0
    private var tombstones = 0
    /// `keys.count - 1`; the table size is a power of two.
    private var mask: Int

    init(minimumCapacity: Int = 0) {
        var size = 8
        while size * 3 < minimumCapacity * 4 { size <<= 1 }
        keys = Array(repeating: Self.empty, count: size)
        values = Array(repeating: nil, count: size)
        mask = size - 1
    }

    /// The slot a row hashes to: blocks of 8 consecutive rows stay
    /// together (a scan in row order touches the table a cache line at a
    /// time), and each block lands where a multiplicative hash of its
    /// number sends it. An earlier hash kept every run of consecutive rows
    /// together; with the table three quarters full, runs merged into long
    /// occupied stretches, and a lookup of an absent row (an index range's
    /// rows, scattered over the table) walked them to their end.
    private func home(_ row: Int64) -> Int { Self.home(row, mask: mask) }

    /// `home(_:)` for a table of `mask + 1` slots (shared with ``RowSet``).
    @inline(__always) static func home(_ row: Int64, mask: Int) -> Int {
        let key = UInt64(bitPattern: row)
        let block = ((key >> 3) &* 0x9E37_79B9_7F4A_7C15) >> 32
        return Int(truncatingIfNeeded: block << 3 | (key & 7)) & mask
    }

    private static func isSpecial(_ row: Int64) -> Bool { row == empty || row == removed }

    private func slot(of row: Int64) -> Int? {
        var index = home(row)
        while true {
            let key = keys[index]
            if key == row { return index }
            if key == Self.empty { return nil }
            index = (index + 1) & mask
        }
    }

    subscript(row: Int64) -> (any PersistentModel)? {
        get { Self.isSpecial(row) ? special[row] : slot(of: row).flatMap { values[$0] } }
        set {
            if Self.isSpecial(row) {
                count += (newValue == nil ? 0 : 1) - (special[row] == nil ? 0 : 1)
                special[row] = newValue
            } else if let newValue {
                insert(row, newValue)
            } else {
                remove(row)
            }
        }
    }

    /// Makes room for `extra` more entries without rehashing on the way.
    mutating func reserve(_ extra: Int) {
        if (count + tombstones + extra) * 4 > keys.count * 3 { rehash(minimumCapacity: count + extra) }
    }

    /// One probe finds the row, or where it goes: the first removed slot of
    /// its run, else the empty slot that ends the run.
    private mutating func insert(_ row: Int64, _ model: any PersistentModel) {
        var index = home(row)
        var free = -1
        while true {
            let key = keys[index]
            if key == row {
                values[index] = model
                return
            }
            if key == Self.empty { break }
            if key == Self.removed && free < 0 { free = index }
            index = (index + 1) & mask
        }
        if (count + tombstones + 1) * 4 > keys.count * 3 {
            rehash(minimumCapacity: count + 1)
            insertNew(row, model)
            return
        }
        if free >= 0 {
            index = free
            tombstones -= 1
        }
        keys[index] = row
        values[index] = model
        count += 1
    }

    /// Inserts a row known to be absent, into a table without tombstones
    /// and with room (a fresh table being filled by `rehash`).
    private mutating func insertNew(_ row: Int64, _ model: any PersistentModel) {
        var index = home(row)
        while keys[index] != Self.empty { index = (index + 1) & mask }
        keys[index] = row
        values[index] = model
        count += 1
    }

    private mutating func remove(_ row: Int64) {
        guard let index = slot(of: row) else { return }
        keys[index] = Self.removed
        values[index] = nil
        count -= 1
        tombstones += 1
    }

    private mutating func rehash(minimumCapacity: Int) {
        var bigger = RowMap(minimumCapacity: max(minimumCapacity, (count + 1) * 2))
        bigger.special = special
        bigger.count = special.count
        for (index, key) in keys.enumerated() where !Self.isSpecial(key) {
            if let value = values[index] { bigger.insertNew(key, value) }
        }
        self = bigger
    }

    /// Every registered model, in no particular order.
    var models: [any PersistentModel] { values.compactMap { $0 } + Array(special.values) }
}
