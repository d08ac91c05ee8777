/// Page 0 of the main file: the file header.
///
/// ```
/// OFFSET SIZE DESCRIPTION
///      0    4 CRC-32C of the page number (0) and bytes 4..<pageSize
///      4    1 page type: 1 (header)
///      5    3 reserved, zero
///      8    8 magic: "StrataDB"
///     16    4 format version: 2 (version 1 had the same layout with zlib
///             CRC-32 checksums; this build refuses it)
///     20    4 page size in bytes: a power of two, 4096...65536
///     24    4 page count: pages 0..<pageCount belong to the store
///     28    4 first freelist trunk page, 0 when the freelist is empty
///     32    4 number of free pages (trunks included)
///     36    4 catalog tree root page (always 1)
///     40    8 change counter: incremented by every commit that changes the
///             header (page count or freelist)
///     48    . reserved, zero
/// ```
///
/// The header travels through the WAL like every other page: a commit that
/// changes it (its page count, freelist or catalog root, say) logs a
/// new image of page 0, so the header seen by a snapshot is the one of its
/// commit. Only the creating process writes page 0 straight into the
/// main file, once, so that page size and magic are always readable there.
struct FileHeader: Equatable {
    static let magic: UInt64 = 0x5374_7261_7461_4442  // "StrataDB"
    static let formatVersion: UInt32 = 2
    static let catalogRoot: UInt32 = 1
    static let minPageSize = 4096
    static let maxPageSize = 65536

    var pageSize: Int
    /// Number of pages in the store, header included. Grows by allocation,
    /// shrinks when free pages at the end are released at commit.
    var pageCount: UInt32
    /// First freelist trunk page (0: none). See `Freelist`.
    var freelistHead: UInt32
    /// Free pages, trunk pages included.
    var freeCount: UInt32
    /// Incremented by every commit that rewrites the header.
    var commitCounter: UInt64

    static func isValidPageSize(_ size: Int) -> Bool {
        size >= minPageSize && size <= maxPageSize && size & (size - 1) == 0
    }

    func write(to page: Page) {
        page.setU8(4, PageType.header.rawValue)
        page.setU64(8, Self.magic)
        page.setU32(16, Self.formatVersion)
        page.setU32(20, UInt32(pageSize))
        page.setU32(24, pageCount)
        page.setU32(28, freelistHead)
        page.setU32(32, freeCount)
        page.setU32(36, Self.catalogRoot)
        page.setU64(40, commitCounter)
    }

    /// Reads the page size out of the first bytes of a main file, before the
    /// whole header page can be read and its checksum verified.
    static func peekPageSize(_ prefix: UnsafeRawPointer, count: Int) throws -> Int {
        guard count >= 48 else { throw StorageError.corruptFile("file is \(count) bytes: too short for a Strata header") }
        guard loadBE64(prefix + 8) == magic else { throw StorageError.corruptFile("not a Strata store (bad magic)") }
        let version = loadBE32(prefix + 16)
        guard version == formatVersion else {
            throw StorageError.corruptFile("unsupported format version \(version) (this build reads \(formatVersion))")
        }
        let size = Int(loadBE32(prefix + 20))
        guard isValidPageSize(size) else { throw StorageError.corruptFile("invalid page size \(size) in header") }
        return size
    }

    /// Decodes and validates a header page whose checksum was verified.
    init(page: Page) throws {
        guard page.u8(4) == PageType.header.rawValue else {
            throw StorageError.corrupt(page: 0, reason: "page type \(page.u8(4)) where the header was expected")
        }
        guard page.u64(8) == Self.magic else { throw StorageError.corrupt(page: 0, reason: "bad magic") }
        guard page.u32(16) == Self.formatVersion else {
            throw StorageError.corrupt(page: 0, reason: "unsupported format version \(page.u32(16))")
        }
        pageSize = Int(page.u32(20))
        guard pageSize == page.size else {
            throw StorageError.corrupt(page: 0, reason: "header page size \(pageSize) differs from the store's \(page.size)")
        }
        pageCount = page.u32(24)
        freelistHead = page.u32(28)
        freeCount = page.u32(32)
        commitCounter = page.u64(40)
        guard page.u32(36) == Self.catalogRoot else {
            throw StorageError.corrupt(page: 0, reason: "catalog root \(page.u32(36)), expected \(Self.catalogRoot)")
        }
        guard pageCount >= 2 else { throw StorageError.corrupt(page: 0, reason: "page count \(pageCount) is below 2") }
        guard freelistHead < pageCount, freeCount < pageCount else {
            throw StorageError.corrupt(
                page: 0, reason: "freelist head \(freelistHead) / count \(freeCount) outside \(pageCount) pages")
        }
    }

    init(pageSize: Int) {
        self.pageSize = pageSize
        pageCount = 2
        freelistHead = 0
        freeCount = 0
        commitCounter = 0
    }
}

/// The type byte at offset 4 of every page.
enum PageType: UInt8 {
    case header = 1
    case branch = 2
    case leaf = 3
    case overflow = 4
    case freelistTrunk = 5
}
