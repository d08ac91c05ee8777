/// Page reads of one handle: the page cache, the main file's mapping, and
/// the verification (checksum, and structure for tree pages) of every page
/// read from disk. A page comes from the cache, the log (the frame the
/// ``WAL`` names for the snapshot) or the main file.
///
/// Locking: every field is guarded by the database's state lock (`lock`);
/// file reads happen outside it.
final class Pager: @unchecked Sendable {
    let main: any StorageFile
    let pageSize: Int
    let wal: WAL
    /// The database's state lock.
    let lock: Lock
    @exclusivity(unchecked) var cache: PageCache
    /// The main file mapped for reading, with its pages' verified marks, or
    /// nil when pages are read with `read` (a file system that cannot map,
    /// or ``DatabaseOptions/memoryMappedReads`` off). Replaced by a larger
    /// mapping when the file outgrows it; pages and transactions using the
    /// old one keep it alive.
    ///
    /// Mapping is safe because of the checkpoint's reader rule: the main
    /// file's image of a page changes only when no reader of any handle can
    /// still read its old image from there, so a view never changes under
    /// a reader.
    @exclusivity(unchecked) var mapped: MappedMainFile?
    /// Whole pages the main file holds, as of this handle's last write,
    /// truncation or measurement of it. A mapped page at or past it is
    /// never touched (mapped memory past the end of a file is not readable).
    @exclusivity(unchecked) var mainFilePages: UInt32 = 0
    /// Pages read from the files and checked.
    @exclusivity(unchecked) var pagesChecked = 0

    init(main: any StorageFile, pageSize: Int, wal: WAL, lock: Lock, cacheBytes: Int) {
        self.main = main
        self.pageSize = pageSize
        self.wal = wal
        self.lock = lock
        cache = PageCache(capacityPages: cacheBytes / pageSize)
    }

    /// The image of page `number` as seen at `position`, from the cache, the
    /// log or the main file; verified whenever it comes from disk.
    func page(_ number: UInt32, at position: UInt64, pageCount: UInt32) throws -> Page {
        guard number < pageCount else {
            throw StorageError.corrupt(page: number, reason: "page number beyond the store's \(pageCount) pages")
        }
        let generation = UInt32(truncatingIfNeeded: position >> 32)
        var mainOnly = false
        while true {
            var frame = -1
            var view: Page?
            var pastMapping = false
            let cached: Page? = lock.withLock {
                if !mainOnly, let found = wal.frame(of: number, at: position) { frame = found }
                let key = frame >= 0 ? PageCache.frameKey(generation: generation, frame: frame) : PageCache.mainKey(number)
                if let page = cache.get(key) { return page }
                guard frame < 0, let mapped else { return nil }
                guard number < mainFilePages else {
                    pastMapping = true
                    return nil
                }
                let page = Page.view(mapped.address(of: number), size: pageSize, region: mapped.region)
                guard mapped.isVerified(number) else {
                    view = page
                    return nil
                }
                cache.put(key, page)
                return page
            }
            if let cached { return cached }
            let page = view ?? Page.uninitialized(pageSize)
            if view != nil {
                // Checked below, outside the lock, like a page just read.
            } else if frame >= 0 {
                guard try wal.readFrame(frame, into: page) else {
                    throw StorageError.corrupt(page: number, reason: "WAL frame \(frame) lies beyond the end of the log")
                }
                // The log restarted while the frame was read: it may be
                // overwritten, and the main file holds this snapshot now
                // (a restart waits for every reader to be at the last
                // commit, all of it backfilled).
                if wal.currentGeneration() != generation {
                    mainOnly = true
                    continue
                }
            } else {
                let n = try main.read(into: page.bytes, count: pageSize, at: Int64(number) * Int64(pageSize))
                guard n == pageSize else { throw Self.beyondEndOfFile(number) }
            }
            guard page.checksumMatches(pageNumber: number) else {
                throw StorageError.corrupt(
                    page: number, reason: frame >= 0 ? "checksum mismatch (WAL frame \(frame))" : "checksum mismatch")
            }
            let type = page.u8(4)
            if type == PageType.leaf.rawValue || type == PageType.branch.rawValue {
                try Node(page: page).validate(pageNumber: number)
            }
            lock.withLock {
                if view != nil { mapped?.markVerified(number) }
                pagesChecked += 1
                if frame < 0 || wal.currentGeneration() == generation {
                    cache.put(
                        frame >= 0 ? PageCache.frameKey(generation: generation, frame: frame) : PageCache.mainKey(number), page)
                }
            }
            // A page past the mapped length: another handle's checkpoint
            // grew the file; measure it so the next reads are mapped.
            if pastMapping { try remeasureMainFile() }
            return page
        }
    }

    /// Writes `count` pages into the main file at their numbers
    /// (`number(i)`, ascending), consecutive pages in one write of up to
    /// 64. `fill(i, slot)` puts page `i`'s image into `slot` (a page's
    /// bytes), once for each page, in order: an image read from the log
    /// goes there without a page of its own.
    ///
    /// `writeback`: a sync follows, so each mebibyte or more written is
    /// sent on to the disk (``StorageFile/startWriteback(offset:count:)``,
    /// from the first byte written since the last such hint to the last)
    /// while the next runs are filled.
    func writeRuns(
        count: Int, writeback: Bool, number: (Int) -> UInt32, fill: (Int, UnsafeMutableRawPointer) throws -> Void
    ) throws {
        let runPages = 64
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: runPages * pageSize, alignment: 16)
        defer { buffer.deallocate() }
        var i = 0
        var pendingFrom: Int64 = -1
        var pendingBytes = 0
        while i < count {
            let first = number(i)
            var j = i
            while j < count && j - i < runPages && number(j) == first &+ UInt32(j - i) {
                try fill(j, buffer + (j - i) * pageSize)
                j += 1
            }
            let offset = Int64(first) * Int64(pageSize)
            let bytes = (j - i) * pageSize
            try main.write(buffer, count: bytes, at: offset)
            i = j
            guard writeback && i < count else { continue }
            if pendingFrom < 0 { pendingFrom = offset }
            pendingBytes += bytes
            if pendingBytes >= 1 << 20 {
                main.startWriteback(offset: pendingFrom, count: Int(offset - pendingFrom) + bytes)
                pendingFrom = -1
                pendingBytes = 0
            }
        }
    }

    static func beyondEndOfFile(_ number: UInt32) -> StorageError {
        StorageError.corrupt(page: number, reason: "page lies beyond the end of the file: truncated")
    }

    /// Measures the main file again (another handle may have grown or cut
    /// it) and maps it anew if it outgrew the mapping.
    func remeasureMainFile() throws {
        let size = try main.size()
        lock.withLock { mainFileResized(to: size) }
    }

    /// Pages this handle just wrote into the main file (a checkpoint's
    /// copies, a commit's fresh pages), now `size` bytes long: cached as
    /// the main file's and marked checked, since the bytes there are the
    /// ones it built or checked. Measures the mapping first, so that the
    /// marks reach pages past its old end. The caller holds `lock`.
    ///
    /// `uncached`: pages written from images checked but not kept (a
    /// checkpoint's frames read back from the log): marked checked, and any
    /// older image of them the cache holds is dropped.
    func adoptWrittenPages(
        _ pages: [(number: UInt32, page: Page)], uncached: [UInt32] = [], mainFileSize size: Int64
    ) {
        mainFileResized(to: size)
        for (number, page) in pages {
            cache.put(PageCache.mainKey(number), page)
            mapped?.markVerified(number)
        }
        for number in uncached {
            cache.remove(PageCache.mainKey(number))
            mapped?.markVerified(number)
        }
    }

    /// Records that the main file is `size` bytes now, and maps it anew when
    /// it outgrew the mapping. Pages past the end lose their verified mark
    /// and their cached views (a view past the end would fault). The caller
    /// holds `lock`.
    func mainFileResized(to size: Int64) {
        let pages = UInt32(clamping: size / Int64(pageSize))
        if pages < mainFilePages {
            for number in pages..<mainFilePages {
                mapped?.clearVerified(number)
                cache.remove(PageCache.mainKey(number))
            }
        }
        mainFilePages = pages
        if let current = mapped, Int(pages) * pageSize > current.region.length {
            mapped = main.mapForReading(length: Self.mappingLength(forFileSize: size)).map {
                MappedMainFile(region: $0, pageSize: pageSize, copyingMarksOf: current)
            }
        }
    }

    /// Forgets what this handle knew of the main file's pages after
    /// another handle's checkpoint rewrote some of them: cached copies go,
    /// mapped pages must be checked again, and the size is measured anew
    /// at the next read past it. The caller holds `lock`.
    func mainFileChangedElsewhere() {
        cache.removeMainPages()
        mapped?.clearAllVerified()
    }

    /// Address space reserved for a main file of `size` bytes: twice its
    /// size and at least ``minimumMappingLength``, so that a growing file is
    /// mapped again only each time it doubles.
    static func mappingLength(forFileSize size: Int64) -> Int {
        max(minimumMappingLength, Int(size) * 2)
    }

    /// 64 MiB; tests lower it to make a small store outgrow its mapping.
    nonisolated(unsafe) static var minimumMappingLength = 64 << 20
}
