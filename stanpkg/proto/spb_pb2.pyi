from stanpkg.proto import protocol_pb2 as _protocol_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ServerInfo(_message.Message):
    __slots__ = ("ClusterID", "Discovery", "Publish", "Subscribe", "Unsubscribe", "Close", "SubClose", "AcksSubs", "NodeID")
    CLUSTERID_FIELD_NUMBER: _ClassVar[int]
    DISCOVERY_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    UNSUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    SUBCLOSE_FIELD_NUMBER: _ClassVar[int]
    ACKSSUBS_FIELD_NUMBER: _ClassVar[int]
    NODEID_FIELD_NUMBER: _ClassVar[int]
    ClusterID: str
    Discovery: str
    Publish: str
    Subscribe: str
    Unsubscribe: str
    Close: str
    SubClose: str
    AcksSubs: str
    NodeID: str
    def __init__(self, ClusterID: _Optional[str] = ..., Discovery: _Optional[str] = ..., Publish: _Optional[str] = ..., Subscribe: _Optional[str] = ..., Unsubscribe: _Optional[str] = ..., Close: _Optional[str] = ..., SubClose: _Optional[str] = ..., AcksSubs: _Optional[str] = ..., NodeID: _Optional[str] = ...) -> None: ...

class ClientInfo(_message.Message):
    __slots__ = ("ID", "HbInbox", "ConnID", "Protocol", "PingInterval", "PingMaxOut")
    ID_FIELD_NUMBER: _ClassVar[int]
    HBINBOX_FIELD_NUMBER: _ClassVar[int]
    CONNID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    PINGINTERVAL_FIELD_NUMBER: _ClassVar[int]
    PINGMAXOUT_FIELD_NUMBER: _ClassVar[int]
    ID: str
    HbInbox: str
    ConnID: bytes
    Protocol: int
    PingInterval: int
    PingMaxOut: int
    def __init__(self, ID: _Optional[str] = ..., HbInbox: _Optional[str] = ..., ConnID: _Optional[bytes] = ..., Protocol: _Optional[int] = ..., PingInterval: _Optional[int] = ..., PingMaxOut: _Optional[int] = ...) -> None: ...

class ClientDelete(_message.Message):
    __slots__ = ("ID",)
    ID_FIELD_NUMBER: _ClassVar[int]
    ID: str
    def __init__(self, ID: _Optional[str] = ...) -> None: ...

class SubState(_message.Message):
    __slots__ = ("ID", "clientID", "qGroup", "inbox", "ackInbox", "maxInFlight", "ackWaitInSecs", "durableName", "lastSent", "isDurable", "isClosed")
    ID_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    QGROUP_FIELD_NUMBER: _ClassVar[int]
    INBOX_FIELD_NUMBER: _ClassVar[int]
    ACKINBOX_FIELD_NUMBER: _ClassVar[int]
    MAXINFLIGHT_FIELD_NUMBER: _ClassVar[int]
    ACKWAITINSECS_FIELD_NUMBER: _ClassVar[int]
    DURABLENAME_FIELD_NUMBER: _ClassVar[int]
    LASTSENT_FIELD_NUMBER: _ClassVar[int]
    ISDURABLE_FIELD_NUMBER: _ClassVar[int]
    ISCLOSED_FIELD_NUMBER: _ClassVar[int]
    ID: int
    clientID: str
    qGroup: str
    inbox: str
    ackInbox: str
    maxInFlight: int
    ackWaitInSecs: int
    durableName: str
    lastSent: int
    isDurable: bool
    isClosed: bool
    def __init__(self, ID: _Optional[int] = ..., clientID: _Optional[str] = ..., qGroup: _Optional[str] = ..., inbox: _Optional[str] = ..., ackInbox: _Optional[str] = ..., maxInFlight: _Optional[int] = ..., ackWaitInSecs: _Optional[int] = ..., durableName: _Optional[str] = ..., lastSent: _Optional[int] = ..., isDurable: _Optional[bool] = ..., isClosed: _Optional[bool] = ...) -> None: ...

class SubStateDelete(_message.Message):
    __slots__ = ("ID",)
    ID_FIELD_NUMBER: _ClassVar[int]
    ID: int
    def __init__(self, ID: _Optional[int] = ...) -> None: ...

class SubStateUpdate(_message.Message):
    __slots__ = ("ID", "seqno")
    ID_FIELD_NUMBER: _ClassVar[int]
    SEQNO_FIELD_NUMBER: _ClassVar[int]
    ID: int
    seqno: int
    def __init__(self, ID: _Optional[int] = ..., seqno: _Optional[int] = ...) -> None: ...

class CtrlMsg(_message.Message):
    __slots__ = ("MsgType", "ServerID", "Data", "RefID")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        SubUnsubscribe: _ClassVar[CtrlMsg.Type]
        SubClose: _ClassVar[CtrlMsg.Type]
        ConnClose: _ClassVar[CtrlMsg.Type]
        FTHeartbeat: _ClassVar[CtrlMsg.Type]
        Partitioning: _ClassVar[CtrlMsg.Type]
    SubUnsubscribe: CtrlMsg.Type
    SubClose: CtrlMsg.Type
    ConnClose: CtrlMsg.Type
    FTHeartbeat: CtrlMsg.Type
    Partitioning: CtrlMsg.Type
    MSGTYPE_FIELD_NUMBER: _ClassVar[int]
    SERVERID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    REFID_FIELD_NUMBER: _ClassVar[int]
    MsgType: CtrlMsg.Type
    ServerID: str
    Data: bytes
    RefID: str
    def __init__(self, MsgType: _Optional[_Union[CtrlMsg.Type, str]] = ..., ServerID: _Optional[str] = ..., Data: _Optional[bytes] = ..., RefID: _Optional[str] = ...) -> None: ...

class RaftJoinRequest(_message.Message):
    __slots__ = ("NodeID", "NodeAddr")
    NODEID_FIELD_NUMBER: _ClassVar[int]
    NODEADDR_FIELD_NUMBER: _ClassVar[int]
    NodeID: str
    NodeAddr: str
    def __init__(self, NodeID: _Optional[str] = ..., NodeAddr: _Optional[str] = ...) -> None: ...

class RaftJoinResponse(_message.Message):
    __slots__ = ("Error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    Error: str
    def __init__(self, Error: _Optional[str] = ...) -> None: ...

class RaftOperation(_message.Message):
    __slots__ = ("OpType", "PublishBatch", "Sub", "Unsub", "SubSentAck", "ClientConnect", "ClientDisconnect", "Channel", "ChannelID")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        Publish: _ClassVar[RaftOperation.Type]
        Subscribe: _ClassVar[RaftOperation.Type]
        RemoveSubscription: _ClassVar[RaftOperation.Type]
        CloseSubscription: _ClassVar[RaftOperation.Type]
        SendAndAck: _ClassVar[RaftOperation.Type]
        Connect: _ClassVar[RaftOperation.Type]
        Disconnect: _ClassVar[RaftOperation.Type]
        DeleteChannel: _ClassVar[RaftOperation.Type]
    Publish: RaftOperation.Type
    Subscribe: RaftOperation.Type
    RemoveSubscription: RaftOperation.Type
    CloseSubscription: RaftOperation.Type
    SendAndAck: RaftOperation.Type
    Connect: RaftOperation.Type
    Disconnect: RaftOperation.Type
    DeleteChannel: RaftOperation.Type
    OPTYPE_FIELD_NUMBER: _ClassVar[int]
    PUBLISHBATCH_FIELD_NUMBER: _ClassVar[int]
    SUB_FIELD_NUMBER: _ClassVar[int]
    UNSUB_FIELD_NUMBER: _ClassVar[int]
    SUBSENTACK_FIELD_NUMBER: _ClassVar[int]
    CLIENTCONNECT_FIELD_NUMBER: _ClassVar[int]
    CLIENTDISCONNECT_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    CHANNELID_FIELD_NUMBER: _ClassVar[int]
    OpType: RaftOperation.Type
    PublishBatch: Batch
    Sub: AddSubscription
    Unsub: _protocol_pb2.UnsubscribeRequest
    SubSentAck: SubSentAndAck
    ClientConnect: AddClient
    ClientDisconnect: _protocol_pb2.CloseRequest
    Channel: str
    ChannelID: int
    def __init__(self, OpType: _Optional[_Union[RaftOperation.Type, str]] = ..., PublishBatch: _Optional[_Union[Batch, _Mapping]] = ..., Sub: _Optional[_Union[AddSubscription, _Mapping]] = ..., Unsub: _Optional[_Union[_protocol_pb2.UnsubscribeRequest, _Mapping]] = ..., SubSentAck: _Optional[_Union[SubSentAndAck, _Mapping]] = ..., ClientConnect: _Optional[_Union[AddClient, _Mapping]] = ..., ClientDisconnect: _Optional[_Union[_protocol_pb2.CloseRequest, _Mapping]] = ..., Channel: _Optional[str] = ..., ChannelID: _Optional[int] = ...) -> None: ...

class Batch(_message.Message):
    __slots__ = ("Messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    Messages: _containers.RepeatedCompositeFieldContainer[_protocol_pb2.MsgProto]
    def __init__(self, Messages: _Optional[_Iterable[_Union[_protocol_pb2.MsgProto, _Mapping]]] = ...) -> None: ...

class AddSubscription(_message.Message):
    __slots__ = ("Request", "AckInbox", "ID")
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    ACKINBOX_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    Request: _protocol_pb2.SubscriptionRequest
    AckInbox: str
    ID: int
    def __init__(self, Request: _Optional[_Union[_protocol_pb2.SubscriptionRequest, _Mapping]] = ..., AckInbox: _Optional[str] = ..., ID: _Optional[int] = ...) -> None: ...

class SubSentAndAck(_message.Message):
    __slots__ = ("Channel", "AckInbox", "Sent", "Ack")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    ACKINBOX_FIELD_NUMBER: _ClassVar[int]
    SENT_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    Channel: str
    AckInbox: str
    Sent: _containers.RepeatedScalarFieldContainer[int]
    Ack: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, Channel: _Optional[str] = ..., AckInbox: _Optional[str] = ..., Sent: _Optional[_Iterable[int]] = ..., Ack: _Optional[_Iterable[int]] = ...) -> None: ...

class AddClient(_message.Message):
    __slots__ = ("Request", "Refresh")
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    REFRESH_FIELD_NUMBER: _ClassVar[int]
    Request: _protocol_pb2.ConnectRequest
    Refresh: bool
    def __init__(self, Request: _Optional[_Union[_protocol_pb2.ConnectRequest, _Mapping]] = ..., Refresh: _Optional[bool] = ...) -> None: ...

class RaftSnapshot(_message.Message):
    __slots__ = ("Clients", "Channels", "Padding")
    CLIENTS_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    PADDING_FIELD_NUMBER: _ClassVar[int]
    Clients: _containers.RepeatedCompositeFieldContainer[ClientInfo]
    Channels: _containers.RepeatedCompositeFieldContainer[ChannelSnapshot]
    Padding: bytes
    def __init__(self, Clients: _Optional[_Iterable[_Union[ClientInfo, _Mapping]]] = ..., Channels: _Optional[_Iterable[_Union[ChannelSnapshot, _Mapping]]] = ..., Padding: _Optional[bytes] = ...) -> None: ...

class ChannelSnapshot(_message.Message):
    __slots__ = ("Channel", "First", "Last", "Subscriptions", "NextSubID", "ChannelID")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    FIRST_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXTSUBID_FIELD_NUMBER: _ClassVar[int]
    CHANNELID_FIELD_NUMBER: _ClassVar[int]
    Channel: str
    First: int
    Last: int
    Subscriptions: _containers.RepeatedCompositeFieldContainer[SubscriptionSnapshot]
    NextSubID: int
    ChannelID: int
    def __init__(self, Channel: _Optional[str] = ..., First: _Optional[int] = ..., Last: _Optional[int] = ..., Subscriptions: _Optional[_Iterable[_Union[SubscriptionSnapshot, _Mapping]]] = ..., NextSubID: _Optional[int] = ..., ChannelID: _Optional[int] = ...) -> None: ...

class SubscriptionSnapshot(_message.Message):
    __slots__ = ("State", "AcksPending")
    STATE_FIELD_NUMBER: _ClassVar[int]
    ACKSPENDING_FIELD_NUMBER: _ClassVar[int]
    State: SubState
    AcksPending: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, State: _Optional[_Union[SubState, _Mapping]] = ..., AcksPending: _Optional[_Iterable[int]] = ...) -> None: ...

class MessagePack(_message.Message):
    __slots__ = ("Data", "Timestamps", "Replies", "Guids")
    DATA_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMPS_FIELD_NUMBER: _ClassVar[int]
    REPLIES_FIELD_NUMBER: _ClassVar[int]
    GUIDS_FIELD_NUMBER: _ClassVar[int]
    Data: _containers.RepeatedScalarFieldContainer[bytes]
    Timestamps: _containers.RepeatedScalarFieldContainer[int]
    Replies: _containers.RepeatedScalarFieldContainer[str]
    Guids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, Data: _Optional[_Iterable[bytes]] = ..., Timestamps: _Optional[_Iterable[int]] = ..., Replies: _Optional[_Iterable[str]] = ..., Guids: _Optional[_Iterable[str]] = ...) -> None: ...
