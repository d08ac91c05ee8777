/// A bounded cache of verified page images, replaced with the CLOCK
/// algorithm. Not thread-safe: the database guards it with its state lock.
///
/// Keys name an immutable page *version*: a main-file page (`mainKey`) or a
/// WAL frame of one generation (`frameKey`). A main-file key is rewritten
/// only by a checkpoint, which replaces the cached image in the same step.
struct PageCache {
    private struct Slot {
        var key: UInt64
        var page: Page
        var referenced: Bool
    }

    private var map: [UInt64: Int] = [:]
    private var slots: [Slot] = []
    private var hand = 0
    let capacity: Int

    init(capacityPages: Int) {
        capacity = max(16, capacityPages)
        map.reserveCapacity(min(capacity, 1 << 16))
    }

    @inline(__always) static func mainKey(_ page: UInt32) -> UInt64 { UInt64(page) }
    @inline(__always) static func frameKey(generation: UInt32, frame: Int) -> UInt64 {
        (1 << 63) | (UInt64(generation & 0x7fff_ffff) << 32) | UInt64(UInt32(truncatingIfNeeded: frame))
    }

    mutating func get(_ key: UInt64) -> Page? {
        guard let i = map[key] else { return nil }
        slots[i].referenced = true
        return slots[i].page
    }

    mutating func put(_ key: UInt64, _ page: Page) {
        if let i = map[key] {
            slots[i].page = page
            slots[i].referenced = true
            return
        }
        if slots.count < capacity {
            map[key] = slots.count
            slots.append(Slot(key: key, page: page, referenced: false))
            return
        }
        while slots[hand].referenced {
            slots[hand].referenced = false
            hand = hand + 1 == slots.count ? 0 : hand + 1
        }
        map.removeValue(forKey: slots[hand].key)
        slots[hand] = Slot(key: key, page: page, referenced: false)
        map[key] = hand
        hand = hand + 1 == slots.count ? 0 : hand + 1
    }

    mutating func remove(_ key: UInt64) {
        guard let i = map.removeValue(forKey: key) else { return }
        let last = slots.count - 1
        if i != last {
            slots[i] = slots[last]
            map[slots[i].key] = i
        }
        slots.removeLast()
        if hand >= slots.count { hand = 0 }
    }

    /// Drops every WAL-frame entry (after a WAL restart their keys would be
    /// reused by the next generation only modulo 2^31, but they are dead).
    mutating func removeFrames() {
        var i = 0
        while i < slots.count {
            if slots[i].key >> 63 == 1 { remove(slots[i].key) } else { i += 1 }
        }
    }

    mutating func removeAll() {
        map.removeAll()
        slots.removeAll()
        hand = 0
    }
}
