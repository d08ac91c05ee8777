/// A context's identity map for one entity: row id → registered model.
///
/// The models are kept in a dense array, in the order they were
/// registered, and an open-addressing table with linear probing maps a row
/// to its position there. Registering a fetched model then writes the
/// table's slot, which the lookup before it has just read, and appends to
/// the array's warm end, instead of storing into a second table at a slot
/// as scattered as the first (a cache miss per model, most of a fetch's
/// time on a large table). Growing the table moves no models, and a
/// context that ends releases its models in the order it made them, which
/// is the order they lie in memory. Key 0 marks an empty slot
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

    /// A table slot: a row, and its model's position in `entries`.
    private struct Slot {
        var row: Int64
        var position: Int32
    }

    /// A registered model and its row (to find its slot when a removal
    /// moves it).
    private struct Entry {
        let row: Int64
        var model: any PersistentModel
    }

    private var slots: [Slot]
    private var entries: ContiguousArray<Entry> = []
    /// Rows 0 and `Int64.min`.
    private var special: [Int64: any PersistentModel] = [:]
    private var tombstones = 0
    /// `slots.count - 1`; the table size is a power of two.
    private var mask: Int

    /// The number of registered models.
    var count: Int { entries.count + special.count }

    init(minimumCapacity: Int = 0) {
        let size = Self.tableSize(for: minimumCapacity)
        slots = Array(repeating: Slot(row: Self.empty, position: 0), count: size)
        mask = size - 1
    }

    /// The smallest table that holds `count` rows at most three quarters full.
    private static func tableSize(for count: Int) -> Int {
        var size = 8
        while size * 3 < count * 4 { size <<= 1 }
        return size
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
            let key = slots[index].row
            if key == row { return index }
            if key == Self.empty { return nil }
            index = (index + 1) & mask
        }
    }

    subscript(row: Int64) -> (any PersistentModel)? {
        get {
            if Self.isSpecial(row) { return special[row] }
            guard let index = slot(of: row) else { return nil }
            return entries[Int(slots[index].position)].model
        }
        set {
            if Self.isSpecial(row) {
                special[row] = newValue
            } else if let newValue {
                insert(row, newValue)
            } else {
                remove(row)
            }
        }
    }

    /// One probe finds the row, or where it goes: the first removed slot of
    /// its run, else the empty slot that ends the run.
    private mutating func insert(_ row: Int64, _ model: any PersistentModel) {
        var index = home(row)
        var free = -1
        while true {
            let key = slots[index].row
            if key == row {
                entries[Int(slots[index].position)].model = model
                return
            }
            if key == Self.empty { break }
            if key == Self.removed && free < 0 { free = index }
            index = (index + 1) & mask
        }
        if (entries.count + tombstones + 1) * 4 > slots.count * 3 {
            rehash(minimumCapacity: entries.count + 1)
            index = home(row)
            while slots[index].row != Self.empty { index = (index + 1) & mask }
        } else if free >= 0 {
            index = free
            tombstones -= 1
        }
        slots[index] = Slot(row: row, position: Int32(entries.count))
        entries.append(Entry(row: row, model: model))
    }

    /// Removes the row's entry; the last entry moves into its place.
    private mutating func remove(_ row: Int64) {
        guard let index = slot(of: row) else { return }
        let position = Int(slots[index].position)
        slots[index].row = Self.removed
        tombstones += 1
        let last = entries.count - 1
        if position != last {
            let moved = entries[last]
            entries[position] = moved
            // The moved row is registered, so its slot exists.
            var at = home(moved.row)
            while slots[at].row != moved.row { at = (at + 1) & mask }
            slots[at].position = Int32(position)
        }
        entries.removeLast()
    }

    /// Rebuilds the table for at least `minimumCapacity` rows, without
    /// tombstones; the entries stay where they are.
    private mutating func rehash(minimumCapacity: Int) {
        let size = Self.tableSize(for: max(minimumCapacity, (entries.count + 1) * 2))
        slots = Array(repeating: Slot(row: Self.empty, position: 0), count: size)
        mask = size - 1
        tombstones = 0
        for (position, entry) in entries.enumerated() {
            var index = home(entry.row)
            while slots[index].row != Self.empty { index = (index + 1) & mask }
            slots[index] = Slot(row: entry.row, position: Int32(position))
        }
    }

    /// Every registered model, in the order registered (a removal moves
    /// the last one into the removed one's place).
    var models: [any PersistentModel] { entries.map(\.model) + Array(special.values) }
}
