import Foundation

@testable import Strata

// Three versions of a small library schema, for the migration tests.

enum LibraryV1: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
    static var models: [any PersistentModel.Type] { [Book.self, Writer.self] }

    @Model final class Book {
        var title: String
        var pages: Int
        var note: String?
        var rating: Int
        var obsolete: String
        var isbn: String
        var code: Int
        var writer: Writer?

        init(title: String, pages: Int, note: String?, rating: Int, isbn: String, code: Int) {
            self.title = title
            self.pages = pages
            self.note = note
            self.rating = rating
            self.obsolete = "old \(pages)"
            self.isbn = isbn
            self.code = code
        }
    }

    @Model final class Writer {
        var name: String
        @Relationship(inverse: \Book.writer) var books: [Book] = []

        init(name: String) { self.name = name }
    }
}

/// V1 → V2 (lightweight): `title` renamed `name`, `note` becomes
/// non-optional with a default, `rating` becomes optional, `obsolete` goes,
/// `year` (with a default) and `subtitle` (optional) arrive, an index on
/// `pages`, and the to-one `writer` becomes the to-many `writers`.
enum LibraryV2: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
    static var models: [any PersistentModel.Type] { [Book.self, Writer.self] }

    @Model final class Book {
        #Index<Book>([\.pages])
        @Attribute(originalName: "title") var name: String
        var pages: Int
        var note: String = "none"
        var rating: Int?
        var isbn: String
        var code: Int
        var year: Int = 2000
        var subtitle: String?
        @Relationship(originalName: "writer") var writers: [Writer] = []

        init(name: String, pages: Int) {
            self.name = name
            self.pages = pages
            self.isbn = ""
            self.code = 0
        }
    }

    @Model final class Writer {
        var name: String
        @Relationship(inverse: \Book.writers) var books: [Book] = []

        init(name: String) { self.name = name }
    }
}

/// V2 → V3 (custom): `isbn` becomes unique, and `summary`, new, is
/// computed from each book's name and pages in `didMigrate`.
enum LibraryV3: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(3, 0, 0) }
    static var models: [any PersistentModel.Type] { [Book.self, Writer.self] }

    @Model final class Book {
        #Index<Book>([\.pages])
        var name: String
        var pages: Int
        var note: String = "none"
        var rating: Int?
        @Attribute(.unique) var isbn: String
        var code: Int
        var year: Int = 2000
        var subtitle: String?
        var summary: String = ""
        var writers: [Writer] = []

        init(name: String, pages: Int, isbn: String) {
            self.name = name
            self.pages = pages
            self.isbn = isbn
            self.code = 0
        }
    }

    @Model final class Writer {
        var name: String
        @Relationship(inverse: \Book.writers) var books: [Book] = []

        init(name: String) { self.name = name }
    }
}

/// V2 with `code` unique: V1's codes collide.
enum LibraryV2UniqueCode: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 1, 0) }
    static var models: [any PersistentModel.Type] { [Book.self, Writer.self] }

    @Model final class Book {
        #Index<Book>([\.pages])
        var name: String
        var pages: Int
        var note: String = "none"
        var rating: Int?
        var isbn: String
        @Attribute(.unique) var code: Int
        var year: Int = 2000
        var subtitle: String?
        var writers: [Writer] = []

        init(name: String, pages: Int) {
            self.name = name
            self.pages = pages
            self.isbn = ""
            self.code = 0
        }
    }

    @Model final class Writer {
        var name: String
        @Relationship(inverse: \Book.writers) var books: [Book] = []

        init(name: String) { self.name = name }
    }
}

/// V1 with an incompatible change: `pages` is now a String.
enum LibraryBroken: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(9, 0, 0) }
    static var models: [any PersistentModel.Type] { [Book.self, Writer.self] }

    @Model final class Book {
        var title: String
        var pages: String
        var note: String?
        var rating: Int
        var obsolete: String
        var isbn: String
        var code: Int
        var writer: Writer?
        var added: Int

        init() {
            title = ""
            pages = ""
            rating = 0
            obsolete = ""
            isbn = ""
            code = 0
            added = 0
        }
    }

    @Model final class Writer {
        var name: String
        @Relationship(inverse: \Book.writer) var books: [Book] = []

        init(name: String) { self.name = name }
    }
}

enum LibraryPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [LibraryV1.self, LibraryV2.self, LibraryV3.self] }
    static var stages: [MigrationStage] { [v1ToV2, v2ToV3] }

    static let v1ToV2 = MigrationStage.lightweight(fromVersion: LibraryV1.self, toVersion: LibraryV2.self)
    static let v2ToV3 = MigrationStage.custom(
        fromVersion: LibraryV2.self, toVersion: LibraryV3.self,
        willMigrate: nil,
        didMigrate: { context in
            for book in try context.fetch(FetchDescriptor<LibraryV3.Book>()) {
                book.summary = "\(book.name) (\(book.pages) pages)"
            }
            try context.save()
        })
}

/// V1 → V2 only (the crash test's migration).
enum LibraryPlanV2: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [LibraryV1.self, LibraryV2.self] }
    static var stages: [MigrationStage] { [LibraryPlan.v1ToV2] }
}

enum LibraryCollidingPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [LibraryV1.self, LibraryV2.self, LibraryV2UniqueCode.self] }
    static var stages: [MigrationStage] {
        [
            LibraryPlan.v1ToV2,
            .lightweight(fromVersion: LibraryV2.self, toVersion: LibraryV2UniqueCode.self),
        ]
    }
}

/// V1 with `code` unique (reached by a custom stage that removes the
/// duplicates first).
enum LibraryV1UniqueCode: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(1, 1, 0) }
    static var models: [any PersistentModel.Type] { [Book.self, Writer.self] }

    @Model final class Book {
        var title: String
        var pages: Int
        var note: String?
        var rating: Int
        var obsolete: String
        var isbn: String
        @Attribute(.unique) var code: Int
        var writer: Writer?

        init(title: String, code: Int) {
            self.title = title
            self.pages = 0
            self.rating = 0
            self.obsolete = ""
            self.isbn = ""
            self.code = code
        }
    }

    @Model final class Writer {
        var name: String
        @Relationship(inverse: \Book.writer) var books: [Book] = []

        init(name: String) { self.name = name }
    }
}

/// V1 → V1UniqueCode, deduplicating in `willMigrate` (on V1's models).
enum LibraryDedupPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [LibraryV1.self, LibraryV1UniqueCode.self] }
    static var stages: [MigrationStage] {
        [
            .custom(
                fromVersion: LibraryV1.self, toVersion: LibraryV1UniqueCode.self,
                willMigrate: { context in
                    var seen: Set<Int> = []
                    for book in try context.fetch(FetchDescriptor<LibraryV1.Book>(sortBy: [SortDescriptor(\.title)]))
                    where !seen.insert(book.code).inserted {
                        context.delete(book)
                    }
                    try context.save()
                }, didMigrate: nil)
        ]
    }
}

/// The same stage, failing after its `willMigrate` saved.
enum LibraryFailingPlan: SchemaMigrationPlan {
    struct Failure: Error {}
    static var schemas: [any VersionedSchema.Type] { [LibraryV1.self, LibraryV1UniqueCode.self] }
    static var stages: [MigrationStage] {
        [
            .custom(
                fromVersion: LibraryV1.self, toVersion: LibraryV1UniqueCode.self,
                willMigrate: { context in
                    try context.delete(model: LibraryV1.Book.self)
                    try context.save()
                },
                didMigrate: { _ in throw Failure() })
        ]
    }
}

/// A stage whose `didMigrate` swallows the error of a save that breaks the
/// new unique constraint: the migration must fail anyway.
enum LibrarySwallowingPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [LibraryV1.self, LibraryV1UniqueCode.self] }
    static var stages: [MigrationStage] {
        [
            .custom(
                fromVersion: LibraryV1.self, toVersion: LibraryV1UniqueCode.self, willMigrate: nil,
                didMigrate: { context in
                    let books = try context.fetch(
                        FetchDescriptor<LibraryV1UniqueCode.Book>(sortBy: [SortDescriptor(\.code)]))
                    books[1].code = books[0].code
                    try? context.save()
                })
        ]
    }
}
