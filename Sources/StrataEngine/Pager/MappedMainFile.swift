import Synchronization

/// The main file's read-only mapping, with one bit per page telling
/// whether its mapped bytes passed the checksum and the node check (or
/// were written by this handle) since they were last written.
///
/// The bits are atomic so that a read transaction can test them without
/// the state lock: that is what lets a reader whose snapshot is wholly in
/// the main file visit a tree page with one bit test and an address
/// computation (``ReadTransaction/treeNode(_:)``), instead of the lock, the
/// page cache's hash and the reference count of a page object. Bits are set
/// under the state lock by whoever verified the page, and cleared under it
/// by a checkpoint that rewrites the page or a truncation that drops it;
/// neither can happen to a page a lock-free reader reads (see
/// ``Database/beginRead()``).
///
/// A mapping covers a fixed number of pages; when the file outgrows it the
/// database maps it anew and copies the bits over. Transactions that hold
/// the old object keep its mapping alive.
final class MappedMainFile: @unchecked Sendable {
    let region: MappedRegion
    let pageSize: Int
    /// 64-bit words of marks: one bit for each page the mapping covers.
    private let words: Int
    private let verified: UnsafeMutablePointer<Atomic<UInt64>>

    init(region: MappedRegion, pageSize: Int, copyingMarksOf old: MappedMainFile? = nil) {
        self.region = region
        self.pageSize = pageSize
        words = (region.length / pageSize + 63) / 64
        verified = .allocate(capacity: max(1, words))
        for i in 0..<words { (verified + i).initialize(to: Atomic(0)) }
        if let old {
            for i in 0..<min(words, old.words) {
                verified[i].store(old.verified[i].load(ordering: .relaxed), ordering: .relaxed)
            }
        }
    }

    deinit {
        verified.deinitialize(count: words)
        verified.deallocate()
    }

    /// The mapped bytes of page `number` (which must be inside the file).
    @inline(__always) func address(of number: UInt32) -> UnsafeMutableRawPointer { view.address(of: number) }

    /// True when page `number`'s mapped bytes have been verified.
    @inline(__always) func isVerified(_ number: UInt32) -> Bool { view.isVerified(number) }

    /// The mapping's address, page size and marks as plain values, for a
    /// transaction to keep: reading them costs no retain and release of
    /// this object on each page visit. Valid while this object lives.
    var view: View {
        View(base: UnsafeMutableRawPointer(mutating: region.base), pageSize: pageSize, words: words, marks: verified)
    }

    struct View {
        let base: UnsafeMutableRawPointer
        let pageSize: Int
        let words: Int
        let marks: UnsafeMutablePointer<Atomic<UInt64>>

        @inline(__always) func address(of number: UInt32) -> UnsafeMutableRawPointer {
            base + Int(number) * pageSize
        }

        @inline(__always) func isVerified(_ number: UInt32) -> Bool {
            let word = Int(number >> 6)
            guard word < words else { return false }
            // Acquiring: the bytes the marker checked (or wrote) are
            // visible to whoever sees the mark.
            return marks[word].load(ordering: .acquiring) & (1 << UInt64(number & 63)) != 0
        }
    }

    /// Marks page `number` verified (pages past the mapping are ignored:
    /// they are never read through it).
    func markVerified(_ number: UInt32) {
        let word = Int(number >> 6)
        guard word < words else { return }
        verified[word].bitwiseOr(1 << UInt64(number & 63), ordering: .releasing)
    }

    /// Clears every mark: another handle's checkpoint rewrote pages this
    /// one cannot name.
    func clearAllVerified() {
        for i in 0..<words { verified[i].store(0, ordering: .releasing) }
    }

    func clearVerified(_ number: UInt32) {
        let word = Int(number >> 6)
        guard word < words else { return }
        verified[word].bitwiseAnd(~(1 << UInt64(number & 63)), ordering: .releasing)
    }
}
