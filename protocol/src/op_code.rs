//! ZooKeeper's numeric tables: opcodes, error codes, create modes, permissions,
//! watch event types and watcher types (`ZooDefs`, `KeeperException.Code`).

/// Request opcodes (`ZooDefs.OpCode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(i32)]
pub enum OpCode {
    Notification = 0,
    Create = 1,
    Delete = 2,
    Exists = 3,
    GetData = 4,
    SetData = 5,
    GetAcl = 6,
    SetAcl = 7,
    GetChildren = 8,
    Sync = 9,
    Ping = 11,
    GetChildren2 = 12,
    Check = 13,
    Multi = 14,
    Create2 = 15,
    Reconfig = 16,
    CheckWatches = 17,
    RemoveWatches = 18,
    CreateContainer = 19,
    DeleteContainer = 20,
    CreateTtl = 21,
    MultiRead = 22,
    Auth = 100,
    SetWatches = 101,
    Sasl = 102,
    GetEphemerals = 103,
    GetAllChildrenNumber = 104,
    SetWatches2 = 105,
    AddWatch = 106,
    WhoAmI = 107,
    CreateSession = -10,
    CloseSession = -11,
    Error = -1,
}

impl OpCode {
    /// Maps a wire value to an opcode; `None` for numbers ZooKeeper does not define.
    pub fn from_i32(v: i32) -> Option<OpCode> {
        use OpCode::*;
        Some(match v {
            0 => Notification,
            1 => Create,
            2 => Delete,
            3 => Exists,
            4 => GetData,
            5 => SetData,
            6 => GetAcl,
            7 => SetAcl,
            8 => GetChildren,
            9 => Sync,
            11 => Ping,
            12 => GetChildren2,
            13 => Check,
            14 => Multi,
            15 => Create2,
            16 => Reconfig,
            17 => CheckWatches,
            18 => RemoveWatches,
            19 => CreateContainer,
            20 => DeleteContainer,
            21 => CreateTtl,
            22 => MultiRead,
            100 => Auth,
            101 => SetWatches,
            102 => Sasl,
            103 => GetEphemerals,
            104 => GetAllChildrenNumber,
            105 => SetWatches2,
            106 => AddWatch,
            107 => WhoAmI,
            -10 => CreateSession,
            -11 => CloseSession,
            -1 => Error,
            _ => return None,
        })
    }

    /// The short tag `cons` shows as `lop=`.
    pub fn short_name(self) -> &'static str {
        use OpCode::*;
        match self {
            Create | Create2 | CreateContainer | CreateTtl => "CREA",
            Delete | DeleteContainer => "DELE",
            SetData => "SETD",
            GetData => "GETD",
            GetChildren | GetChildren2 => "GETC",
            Exists => "EXIS",
            GetAcl => "GETA",
            SetAcl => "SETA",
            Multi => "MULT",
            MultiRead => "MLTR",
            Sync => "SYNC",
            Ping => "PING",
            CreateSession => "SESS",
            CloseSession => "CLOS",
            SetWatches => "SETW",
            SetWatches2 => "STW2",
            AddWatch => "ADDW",
            CheckWatches => "CHKW",
            RemoveWatches => "REMW",
            Check => "CHEC",
            Reconfig => "RECO",
            WhoAmI => "HOMI",
            GetEphemerals => "GETE",
            GetAllChildrenNumber => "GETACN",
            _ => "NA",
        }
    }
}

/// `KeeperException.Code`: the `err` of a ReplyHeader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(i32)]
pub enum ErrorCode {
    Ok = 0,
    SystemError = -1,
    RuntimeInconsistency = -2,
    DataInconsistency = -3,
    ConnectionLoss = -4,
    MarshallingError = -5,
    Unimplemented = -6,
    OperationTimeout = -7,
    BadArguments = -8,
    UnknownSession = -12,
    NewConfigNoQuorum = -13,
    ReconfigInProgress = -14,
    ApiError = -100,
    NoNode = -101,
    NoAuth = -102,
    BadVersion = -103,
    NoChildrenForEphemerals = -108,
    NodeExists = -110,
    NotEmpty = -111,
    SessionExpired = -112,
    InvalidCallback = -113,
    InvalidAcl = -114,
    AuthFailed = -115,
    SessionMoved = -118,
    NotReadOnly = -119,
    EphemeralOnLocalSession = -120,
    NoWatcher = -121,
    RequestTimeout = -122,
    ReconfigDisabled = -123,
    SessionClosedRequireSaslAuth = -124,
    QuotaExceeded = -125,
    ThrottledOp = -127,
}

impl ErrorCode {
    /// Every code, for tables and tests.
    pub const ALL: [ErrorCode; 32] = {
        use ErrorCode::*;
        [
            Ok,
            SystemError,
            RuntimeInconsistency,
            DataInconsistency,
            ConnectionLoss,
            MarshallingError,
            Unimplemented,
            OperationTimeout,
            BadArguments,
            UnknownSession,
            NewConfigNoQuorum,
            ReconfigInProgress,
            ApiError,
            NoNode,
            NoAuth,
            BadVersion,
            NoChildrenForEphemerals,
            NodeExists,
            NotEmpty,
            SessionExpired,
            InvalidCallback,
            InvalidAcl,
            AuthFailed,
            SessionMoved,
            NotReadOnly,
            EphemeralOnLocalSession,
            NoWatcher,
            RequestTimeout,
            ReconfigDisabled,
            SessionClosedRequireSaslAuth,
            QuotaExceeded,
            ThrottledOp,
        ]
    };

    /// The wire value.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// Maps a wire value back to a code.
    pub fn from_i32(v: i32) -> Option<ErrorCode> {
        Self::ALL.iter().copied().find(|c| c.code() == v)
    }
}

/// `CreateMode`: the `flags` of a create request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateMode {
    Persistent,
    Ephemeral,
    PersistentSequential,
    EphemeralSequential,
    Container,
    PersistentWithTtl,
    PersistentSequentialWithTtl,
}

impl CreateMode {
    /// Maps create flags to a mode; other values are BADARGUMENTS.
    pub fn from_flags(flags: i32) -> Option<CreateMode> {
        use CreateMode::*;
        Some(match flags {
            0 => Persistent,
            1 => Ephemeral,
            2 => PersistentSequential,
            3 => EphemeralSequential,
            4 => Container,
            5 => PersistentWithTtl,
            6 => PersistentSequentialWithTtl,
            _ => return None,
        })
    }

    /// Whether the node dies with its session.
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    /// Whether the server appends a 10-digit counter to the name.
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl
        )
    }

    /// Whether this is a container node.
    pub fn is_container(self) -> bool {
        self == CreateMode::Container
    }

    /// Whether the node carries a time to live.
    pub fn is_ttl(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl
        )
    }
}

/// ACL permission bits (`ZooDefs.Perms`).
pub struct Perms;

impl Perms {
    pub const READ: i32 = 1;
    pub const WRITE: i32 = 2;
    pub const CREATE: i32 = 4;
    pub const DELETE: i32 = 8;
    pub const ADMIN: i32 = 16;
    pub const ALL: i32 = 31;
}

/// `Watcher.Event.EventType` values the server sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(i32)]
pub enum EventType {
    NodeCreated = 1,
    NodeDeleted = 2,
    NodeDataChanged = 3,
    NodeChildrenChanged = 4,
}

/// `Watcher.WatcherType`: the `type` of checkWatches and removeWatches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatcherType {
    Children,
    Data,
    Any,
    Persistent,
    PersistentRecursive,
}

impl WatcherType {
    /// Maps the wire value; types 4 and 5 exist since 3.9.0 (ZOOKEEPER-4472).
    pub fn from_i32(v: i32) -> Option<WatcherType> {
        Some(match v {
            1 => WatcherType::Children,
            2 => WatcherType::Data,
            3 => WatcherType::Any,
            4 => WatcherType::Persistent,
            5 => WatcherType::PersistentRecursive,
            _ => return None,
        })
    }
}

/// `ZooDefs.AddWatchModes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddWatchMode {
    Persistent,
    PersistentRecursive,
}

impl AddWatchMode {
    /// Maps the wire value; anything else is MARSHALLINGERROR.
    pub fn from_i32(v: i32) -> Option<AddWatchMode> {
        match v {
            0 => Some(AddWatchMode::Persistent),
            1 => Some(AddWatchMode::PersistentRecursive),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_round_trip() {
        for c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_i32(c.code()), Some(c));
        }
        assert_eq!(ErrorCode::NoNode.code(), -101);
        assert_eq!(ErrorCode::from_i32(-9), None);
    }

    #[test]
    fn opcodes_round_trip() {
        for v in -20..200 {
            if let Some(op) = OpCode::from_i32(v) {
                assert_eq!(op as i32, v);
            }
        }
        assert_eq!(OpCode::from_i32(10), None);
    }
}
