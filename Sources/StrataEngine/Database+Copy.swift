extension Database {
    /// Writes a compacted copy of the store to `destination` (which must not
    /// exist): every tree is rewritten in key order into densely packed
    /// pages, with no free pages. Runs in a read snapshot, so writers go on
    /// meanwhile; the copy reflects the snapshot.
    ///
    /// `progress`, when given, is called now and then with the entries
    /// copied so far and the entries in all.
    public func compact(to destination: String, progress: ((_ done: Int, _ total: Int) -> Void)? = nil) throws {
        guard !fileSystem.exists(destination) else {
            throw StorageError.invalidOptions("compact destination \(destination) already exists")
        }
        let tx = try beginRead()
        defer { tx.end() }
        var options = DatabaseOptions(pageSize: pageSize, durability: .normal, cacheSizeBytes: 8 << 20)
        options.checkpointThresholdFrames = 1 << 30
        let target = try Database.open(path: destination, options: options, fileSystem: fileSystem)
        do {
            let names = try tx.treeNames()
            let total = try names.reduce(0) { $0 + (try tx.count(try tx.tree($1))) }
            var done = 0
            try target.write { out in
                for name in names {
                    let source = try tx.tree(name)
                    let copy = try out.createTree(name)
                    let cursor = try tx.cursor(source)
                    var more = try cursor.first()
                    while more {
                        try out.put(try cursor.key(), try cursor.value(), in: copy)
                        done += 1
                        if done % 4096 == 0 { progress?(done, total) }
                        more = try cursor.next()
                    }
                }
            }
            try target.close()
            try fileSystem.remove(destination + "-wal")
            try fileSystem.syncDirectory(of: destination)
        } catch {
            try? target.close()
            throw error
        }
    }

    /// Copies the store to `destination` (which must not exist) page by
    /// page, as of the snapshot at the call: a consistent store file with no
    /// log, made while writers go on. Free pages are written as zeros.
    ///
    /// `progress`, when given, is called now and then with the pages
    /// copied so far and the pages in all.
    public func backup(to destination: String, progress: ((_ done: Int, _ total: Int) -> Void)? = nil) throws {
        guard !fileSystem.exists(destination) else {
            throw StorageError.invalidOptions("backup destination \(destination) already exists")
        }
        let tx = try beginRead()
        defer { tx.end() }
        let freelist = try loadFreelist(tx.snapshot)
        let trunkPages = Set(freelist.layout(pageSize: pageSize).map(\.trunk))
        let free = Set(freelist.pages).subtracting(trunkPages)
        let out = try fileSystem.open(destination, create: true, readOnly: false)
        defer { out.close() }
        let zero = Page.zeroed(pageSize)
        for number in 0..<tx.snapshot.header.pageCount {
            let page = free.contains(number) ? zero : try tx.page(number)
            try out.write(page.bytes, count: pageSize, at: Int64(number) * Int64(pageSize))
            if number % 4096 == 0 { progress?(Int(number), Int(tx.snapshot.header.pageCount)) }
        }
        progress?(Int(tx.snapshot.header.pageCount), Int(tx.snapshot.header.pageCount))
        try out.sync()
        try fileSystem.syncDirectory(of: destination)
    }
}
